// The approvals page (issue 18 item 4): "select all on this page", the count of ticked
// proposals, j / k to move between the proposals' checkboxes (Space ticks one) and
// Ctrl+Enter to approve the ticked ones in one action.
(function () {
  "use strict";
  function boxes() {
    return Array.prototype.slice.call(document.querySelectorAll("input[data-proposal-select]:not([disabled])"));
  }
  function update() {
    var all = boxes();
    var n = all.filter(function (b) { return b.checked; }).length;
    var count = document.querySelector("[data-selected-count]");
    if (count) count.textContent = "(" + n + ")";
    var every = document.querySelector("[data-select-all]");
    if (every) {
      every.checked = n > 0 && n === all.length;
      every.indeterminate = n > 0 && n < all.length;
    }
  }
  function typing(el) {
    var tag = el && el.tagName;
    if (tag === "INPUT" && (el.type === "checkbox" || el.type === "radio")) return false;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (el && el.isContentEditable);
  }
  document.addEventListener("change", function (event) {
    if (event.target.hasAttribute("data-select-all")) {
      var on = event.target.checked;
      boxes().forEach(function (b) { b.checked = on; });
    }
    update();
  });
  document.addEventListener("keydown", function (event) {
    var form = document.getElementById("bulk-approve");
    if (!form) return;
    var t = event.target;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      // not from another form's field (a single proposal's comment sends that form)
      if (t && t.form && t.form !== form) return;
      event.preventDefault();
      form.requestSubmit();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(t)) return;
    if (event.key !== "j" && event.key !== "k") return;
    var all = boxes();
    if (!all.length) return;
    var card = t && t.closest && t.closest("article");
    var at = all.findIndex(function (b) { return b === t || (card && card.contains(b)); });
    var next = at < 0 ? (event.key === "j" ? 0 : all.length - 1) : at + (event.key === "j" ? 1 : -1);
    if (next < 0 || next >= all.length) return;
    event.preventDefault();
    all[next].focus();
    all[next].scrollIntoView({ block: "center" });  // clear of the sticky bulk bar
  });
  document.addEventListener("DOMContentLoaded", update);
})();
