// Review pages: let htmx swap 403 (refused: e.g. the item was reassigned meanwhile), 409
// (conflict) and 422 (form errors) responses, and wire the
// outcome shortcuts (a / e / r choose confirm / correction / removal and focus the form).
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    if (window.htmx) {
      htmx.config.responseHandling = [
        { code: "204", swap: false },
        { code: "[23]..", swap: true },
        { code: "403|409|422", swap: true, error: false },
        { code: "[45]..", swap: false, error: true },
      ];
    }
  });
  function showOutcomeFields(form) {
    if (!form) return;
    var checked = form.querySelector('input[name="action"]:checked');
    var action = checked ? checked.value : "";
    form.querySelectorAll("[data-for-action]").forEach(function (el) {
      el.hidden = el.getAttribute("data-for-action").split(" ").indexOf(action) < 0;
    });
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-choose-action]");
    if (!button) return;
    var form = document.getElementById("outcome-form");
    if (!form) return;
    var radio = form.querySelector('input[name="action"][value="' + button.getAttribute("data-choose-action") + '"]');
    if (radio) {
      radio.checked = true;
      showOutcomeFields(form);
      var first = form.querySelector("[data-first-field]:not([hidden]) textarea, [data-first-field]:not([hidden]) select") || radio;
      first.focus();
      form.scrollIntoView({ block: "nearest" });
    }
  });
  document.addEventListener("change", function (event) {
    if (event.target.name === "action") showOutcomeFields(event.target.form);
  });
  function init() { showOutcomeFields(document.getElementById("outcome-form")); }
  document.addEventListener("DOMContentLoaded", init);
  document.addEventListener("htmx:afterSwap", init);
})();
