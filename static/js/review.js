// Review pages: let htmx swap 403 (refused: e.g. the item was reassigned meanwhile), 409
// (conflict) and 422 (form errors) responses, and wire the
// outcome shortcuts (a / e / r choose confirm / correction / removal and focus the form).
// The decision panel (issue 18): digits 1-4 answer the highlighted citation question (the
// one holding focus, else the first unanswered) and move on; Ctrl+Enter submits the panel
// from any field; a refused form puts focus on its first error.
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
  // A correction's fields start with the key's text: focused while still unchanged, their
  // text is selected, so typing replaces it instead of landing in front of it.
  document.addEventListener("focusin", function (event) {
    var field = event.target;
    if (!field.matches || !field.matches("[data-for-action] textarea, [data-for-action] input[type=text]")) return;
    if (field.value && field.value === field.defaultValue) field.select();
  });
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-choose-action]");
    if (!button) return;
    var form = document.getElementById("decide-form") || document.getElementById("outcome-form");
    if (!form) return;
    var radio = form.querySelector('input[name="action"][value="' + button.getAttribute("data-choose-action") + '"]');
    if (radio) {
      radio.checked = true;
      showOutcomeFields(form);
      var first = form.querySelector("[data-first-field]:not([hidden]) textarea, [data-first-field]:not([hidden]) select, [data-first-field]:not([hidden]) input[type=text]") || radio;
      warnContradiction(form);
      first.focus();
      first.scrollIntoView({ block: "nearest" });
    }
  });
  // "Expand all responses" (issue 18): open or close every response with its judges' reasons.
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-expand-all]");
    if (!button) return;
    var open = button.getAttribute("aria-expanded") !== "true";
    document.querySelectorAll("details.response-details").forEach(function (d) { d.open = open; });
    button.setAttribute("aria-expanded", open ? "true" : "false");
    button.firstChild.textContent = open ? "Collapse all responses " : "Expand all responses ";
  });
  // A reason the panel's own check contradicts ("Amended or repealed since" with "amended:
  // no"): warn before saving. The rules come from the page (review.services.CONTRADICTIONS).
  function warnContradiction(form) {
    var box = document.getElementById("decide-contradiction");
    var rules = document.getElementById("decide-contradictions");
    if (!form || !box || !rules) return;
    var table = JSON.parse(rules.textContent);
    var action = form.querySelector('input[name="action"]:checked');
    var reason = form.querySelector('select[name="reason"]');
    var rule = action && action.value !== "confirm" && reason ? table[reason.value] : null;
    var given = rule ? form.querySelector('input[name="' + rule.field + '"]:checked') : null;
    if (rule && given && given.value === rule.answer) {
      box.textContent = "Check before saving: " + rule.text + ". Change the reason or the answer, or say why in the evidence note.";
      box.hidden = false;
    } else {
      box.hidden = true;
    }
  }
  document.addEventListener("change", function (event) {
    if (event.target.form && event.target.form.id === "decide-form") warnContradiction(event.target.form);
    if (event.target.name === "action") showOutcomeFields(event.target.form);
    var decide = document.getElementById("decide-form");
    if (decide && decide.contains(event.target)) markCurrent(decide);
  });
  function currentQuestion(form) {
    var questions = Array.prototype.slice.call(form.querySelectorAll("[data-check-question]"));
    var active = document.activeElement && document.activeElement.closest("[data-check-question]");
    if (active) return active;
    for (var i = 0; i < questions.length; i++) {
      if (!questions[i].querySelector("input:checked")) return questions[i];
    }
    return null;
  }
  function markCurrent(form) {
    if (!form) return;
    var current = currentQuestion(form);
    form.querySelectorAll("[data-check-question]").forEach(function (q) {
      q.classList.toggle("current", q === current);
    });
  }
  document.addEventListener("keydown", function (event) {
    var form = document.getElementById("decide-form");
    if (!form || form.hasAttribute("data-stale")) return;  // a refused, disabled panel
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || !/^[1-9]$/.test(event.key)) return;
    var t = event.target;
    var tag = t && t.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT" || (tag === "INPUT" && t.type !== "radio" && t.type !== "checkbox")) return;
    var question = currentQuestion(form);
    if (!question) return;
    var radios = question.querySelectorAll('input[type="radio"]');
    var radio = radios[parseInt(event.key, 10) - 1];
    if (!radio) return;
    event.preventDefault();
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    if (document.activeElement && question.contains(document.activeElement)) document.activeElement.blur();
    markCurrent(form);
  });
  function focusFirstError(root) {
    var bad = root && root.querySelector(".has-error input:not([type=hidden]), .has-error select, .has-error textarea, .form-errors");
    if (!bad) return;
    if (bad.classList.contains("form-errors")) bad.setAttribute("tabindex", "-1");
    bad.focus();
    bad.scrollIntoView({ block: "nearest" });
  }
  function init(event) {
    showOutcomeFields(document.getElementById("outcome-form"));
    var decide = document.getElementById("decide-form");
    showOutcomeFields(decide);
    markCurrent(decide);
    if (decide && decide.hasAttribute("data-stale")) {
      var refused = document.getElementById("decide-refused");
      if (refused) refused.focus();
    } else if (decide) focusFirstError(decide);
  }
  // The decision column scrolls inside itself when taller than the screen; its height is
  // what is left of the screen below its top, so its bottom (and "Record decision", sticky
  // there) is always on screen, also before the page is scrolled (issue 30 item 3). CSS
  // alone gives it the whole screen's height, which ran past the fold under the header.
  function fitDecisionColumn() {
    var column = document.querySelector(".decision-column");
    if (!column) return;
    if (getComputedStyle(column).position !== "sticky") {
      column.style.maxHeight = "";
      return;
    }
    var top = Math.max(column.getBoundingClientRect().top, 8);
    column.style.maxHeight = Math.max(window.innerHeight - top - 8, 240) + "px";
  }
  document.addEventListener("DOMContentLoaded", init);
  document.addEventListener("htmx:afterSwap", init);
  document.addEventListener("DOMContentLoaded", fitDecisionColumn);
  document.addEventListener("htmx:afterSwap", fitDecisionColumn);
  window.addEventListener("scroll", fitDecisionColumn, { passive: true });
  window.addEventListener("resize", fitDecisionColumn);
})();
