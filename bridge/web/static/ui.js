// olbridge ui: the few things a page does better with JavaScript; every page works without it.
"use strict";
(function () {
  // Search as one types: a form marked data-live="ID" fetches its own page with the new query
  // and swaps in the element ID; the address follows, so the view stays a link one can send.
  function live(form) {
    var target = document.getElementById(form.dataset.live);
    if (!target) return;
    var timer = null;
    var pending = null;
    function refresh() {
      var params = new URLSearchParams();
      new FormData(form).forEach(function (value, key) {
        if (value !== "" && key !== "after") params.append(key, value);
      });
      var url = form.getAttribute("action") + "?" + params.toString();
      if (pending) pending.abort();
      pending = new AbortController();
      fetch(url, { signal: pending.signal, credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (text) {
          if (text === null) return;
          var doc = new DOMParser().parseFromString(text, "text/html");
          var fresh = doc.getElementById(form.dataset.live);
          if (fresh) { target.replaceWith(fresh); target = fresh; }
          history.replaceState(null, "", url);
        })
        .catch(function () {});
    }
    form.querySelectorAll("input[type=search]").forEach(function (input) {
      input.addEventListener("input", function () {
        clearTimeout(timer);
        timer = setTimeout(refresh, 200);
      });
    });
  }
  // The time slider: shows the moment it is on while it moves, and goes there when let go; the
  // page it goes to gives it the focus back, so the arrow keys go on stepping from there.
  var FOCUS = "olbridge-focus";
  function slider(input) {
    var moments = (input.dataset.moments || "").split(" ");
    var out = document.getElementById("step-at");
    input.addEventListener("input", function () {
      if (out) out.textContent = moments[Number(input.value)] || "";
    });
    input.addEventListener("change", function () {
      try { sessionStorage.setItem(FOCUS, input.id); } catch (e) { /* storage off: focus not kept */ }
      input.form.requestSubmit();
    });
    // Another asset, direction or depth has moments of its own: its page starts at the latest,
    // not at this one's step number (the slider, disabled, is not sent).
    input.form.addEventListener("submit", function () {
      var changed = Array.prototype.some.call(input.form.elements, function (field) {
        if (field === input || !field.name) return false;
        if (field.tagName === "SELECT") {
          return Array.prototype.some.call(field.options, function (o) { return o.selected !== o.defaultSelected; });
        }
        return field.value !== field.defaultValue;
      });
      if (changed) input.disabled = true;
    });
    // a page come back to (Back) shows its own moment, not where the slider was moved before
    window.addEventListener("pageshow", function () {
      input.disabled = false;
      input.value = input.defaultValue;
      if (out) out.textContent = moments[Number(input.value)] || "";
    });
  }
  function refocus() {
    var id = null;
    try { id = sessionStorage.getItem(FOCUS); sessionStorage.removeItem(FOCUS); } catch (e) { return; }
    var input = id ? document.getElementById(id) : null;
    if (input && input.hasAttribute("data-autosubmit")) input.focus();
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form[data-live]").forEach(live);
    document.querySelectorAll("input[data-autosubmit]").forEach(slider);
    refocus();
  });
})();
