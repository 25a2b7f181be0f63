// Blind grading page (issue 31 item 2): Ctrl+Enter (or Cmd+Enter) saves the grade from any
// field, the note included. The digit, n, s, j and k shortcuts are data-key attributes
// handled by snaglist.js, as on the review item page.
(function () {
  "use strict";
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey)) return;
    var form = document.getElementById("human-grade-form");
    if (!form) return;
    event.preventDefault();
    form.requestSubmit();
  });
})();
