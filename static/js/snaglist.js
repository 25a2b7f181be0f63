// Keyboard shortcuts and small page behaviours. No framework: htmx does the requests.
// An element with data-key="x" is clicked (or focused, for inputs) when "x" is pressed
// outside a text field; "?" opens the element with id="shortcut-help" if the page has one.
(function () {
  "use strict";
  function typing(el) {
    if (!el) return false;
    var tag = el.tagName;
    // A focused radio button or checkbox takes no text: shortcuts still work there.
    if (tag === "INPUT" && (el.type === "radio" || el.type === "checkbox")) return false;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var key = event.key;
    if (key === "?") {
      var help = document.getElementById("shortcut-help");
      if (help) {
        if (typeof help.showModal === "function" && !help.open) help.showModal();
        else if (help.open) help.close();
        event.preventDefault();
      }
      return;
    }
    var target = document.querySelector('[data-key="' + CSS.escape(key) + '"]:not([disabled])');
    if (!target) return;
    event.preventDefault();
    if (typing(target)) target.focus();
    else target.click();
  });
  // A form with data-confirm="question" asks before it is sent (for what cannot be undone).
  document.addEventListener("submit", function (event) {
    var question = event.target.getAttribute && event.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });
  // After an htmx swap, move focus to the first element that asks for it (keyboard users).
  document.addEventListener("htmx:afterSwap", function (event) {
    var el = event.detail.target.querySelector("[data-autofocus]");
    if (el) el.focus();
  });
})();
