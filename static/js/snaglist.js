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
  // A failed htmx request says so (issue 18): a 5xx, a refused request or a lost
  // connection shows a message at the top of the page instead of nothing.
  function showRequestError(text) {
    var box = document.getElementById("request-error");
    if (!box) {
      box = document.createElement("div");
      box.id = "request-error";
      box.className = "message message-error";
      box.setAttribute("role", "alert");
      box.setAttribute("tabindex", "-1");
      var main = document.getElementById("main") || document.body;
      main.insertBefore(box, main.firstChild);
    }
    box.textContent = text;
    box.scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var status = xhr ? xhr.status : 0;
    var text;
    if (status >= 500) {
      text = "The server failed to answer (error " + status + "). Nothing on this page was " +
        "changed; try again, or reload the page.";
    } else {
      var said = "";
      try {
        var doc = new DOMParser().parseFromString(xhr.responseText || "", "text/html");
        var alert = doc.querySelector("[role=alert]");
        said = alert ? alert.textContent.trim() : "";
      } catch (e) { said = ""; }
      text = said || "The request was refused (error " + status + "). Reload the page and try again.";
    }
    showRequestError(text);
  });
  function lost() {
    showRequestError("The server could not be reached (no connection, or it did not answer in " +
      "time). Nothing on this page was changed; check your connection and try again.");
  }
  document.addEventListener("htmx:sendError", lost);
  document.addEventListener("htmx:timeout", lost);
  // A new successful swap clears an old error message.
  document.addEventListener("htmx:afterSwap", function () {
    var box = document.getElementById("request-error");
    if (box) box.remove();
  });
  // A table wider than its box gets a visible hint and an edge shadow (issue 18): the
  // scroller was unmarked, so columns past the edge went unnoticed.
  function markScrollers() {
    document.querySelectorAll(".table-wrap").forEach(function (wrap) {
      var scrolls = wrap.scrollWidth > wrap.clientWidth + 1;
      wrap.classList.toggle("scrolls", scrolls);
      var hint = wrap.previousElementSibling;
      var has = hint && hint.classList.contains("scroll-hint");
      if (scrolls && !has) {
        hint = document.createElement("p");
        hint.className = "scroll-hint";
        hint.textContent = "Scroll sideways for more columns →";
        wrap.parentNode.insertBefore(hint, wrap);
        if (!wrap.hasAttribute("tabindex")) wrap.setAttribute("tabindex", "0");
      } else if (!scrolls && has) {
        hint.remove();
      }
    });
  }
  document.addEventListener("DOMContentLoaded", markScrollers);
  document.addEventListener("htmx:afterSettle", markScrollers);
  window.addEventListener("resize", markScrollers);

  // Re-score forms: a budget cap is for live runs only (the service refuses it on a batch
  // run), so choosing "Batch API" disables the cap fields and says why.
  function syncCaps(select) {
    var form = select.form;
    var batch = select.value === "batch";
    form.querySelectorAll('input[name="budget_cost"], input[name="budget_tokens"]').forEach(function (input) {
      input.disabled = batch;
    });
    var note = form.querySelector(".cap-note");
    if (batch && !note) {
      note = document.createElement("span");
      note.className = "cap-note muted";
      note.textContent = " Caps apply to live runs only: a batch is billed when the vendor ends it.";
      select.insertAdjacentElement("afterend", note);
    } else if (!batch && note) {
      note.remove();
    }
  }
  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches('form select[name="mode"]')) syncCaps(event.target);
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll('form select[name="mode"]').forEach(syncCaps);
  });

  // Re-score forms with data-estimate="ID": a cap typed below the estimate (the element ID,
  // the estimate fragment, carries data-cost, data-tokens and data-currency) is warned
  // about in the form's .cap-warning: the run would stop before it is finished.
  function number(text) {
    var value = parseFloat(String(text || "").replace(/[,_\s]/g, ""));
    return isNaN(value) ? null : value;
  }
  function checkCaps(form) {
    var warning = form.querySelector(".cap-warning");
    var estimate = document.getElementById(form.dataset.estimate);
    if (!warning) return;
    var said = [];
    if (estimate) {
      var cost = form.querySelector('input[name="budget_cost"]');
      var tokens = form.querySelector('input[name="budget_tokens"]');
      var needCost = number(estimate.dataset.cost);
      var needTokens = number(estimate.dataset.tokens);
      var capCost = cost && !cost.disabled ? number(cost.value) : null;
      var capTokens = tokens && !tokens.disabled ? number(tokens.value) : null;
      if (capCost !== null && needCost !== null && capCost < needCost) {
        said.push("the cost cap " + cost.value.trim() + " " + estimate.dataset.currency +
          " is below the estimated " + needCost.toFixed(needCost < 1 ? 4 : 2) + " " + estimate.dataset.currency);
      }
      if (capTokens !== null && needTokens !== null && capTokens < needTokens) {
        said.push("the token cap " + capTokens.toLocaleString("en-GB") + " is below the estimated " +
          needTokens.toLocaleString("en-GB") + " tokens");
      }
    }
    warning.hidden = !said.length;
    warning.textContent = said.length
      ? "Warning: " + said.join("; ") + ": the run would stop before it is finished (you can resume it with a higher cap)."
      : "";
  }
  document.addEventListener("input", function (event) {
    var form = event.target.form;
    if (form && form.dataset.estimate) checkCaps(form);
  });
  document.addEventListener("change", function (event) {
    var form = event.target.form;
    if (form && form.dataset.estimate) checkCaps(form);
  });
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("form[data-estimate]").forEach(checkCaps);
  });
})();
