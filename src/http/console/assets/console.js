// compactd console: progressive enhancement only. Every page works without this file.
(function () {
  "use strict";
  // Times in the reader's own zone, as "5 min ago" for the last day.
  var fmt = window.Intl && Intl.RelativeTimeFormat ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;
  document.querySelectorAll("time[datetime]").forEach(function (el) {
    var t = Date.parse(el.getAttribute("datetime"));
    if (isNaN(t)) return;
    el.title = new Date(t).toLocaleString();
    var s = Math.round((t - Date.now()) / 1000);
    if (fmt && Math.abs(s) < 86400) {
      el.textContent = Math.abs(s) < 60 ? fmt.format(s, "second") : Math.abs(s) < 3600 ? fmt.format(Math.round(s / 60), "minute") : fmt.format(Math.round(s / 3600), "hour");
    } else {
      el.textContent = new Date(t).toLocaleString();
    }
  });
  // The keepRecentTokens slider moves its number, and plans again when let go.
  document.querySelectorAll("input[type=range][data-mirror]").forEach(function (range) {
    var number = document.getElementById(range.dataset.mirror);
    if (!number) return;
    range.removeAttribute("aria-hidden");
    range.addEventListener("input", function () { number.value = range.value; });
    range.addEventListener("change", function () { range.form.submit(); });
    number.addEventListener("input", function () { range.value = number.value; });
  });
  // Only the active path, when asked.
  var pathOnly = document.getElementById("path-only");
  var tree = document.getElementById("tree");
  if (pathOnly && tree) {
    pathOnly.addEventListener("change", function () { tree.classList.toggle("path-only", pathOnly.checked); });
  }
  // A summary takes a while: say so, and do not send it twice.
  document.querySelectorAll("form[data-busy]").forEach(function (form) {
    form.addEventListener("submit", function () {
      var button = form.querySelector("button[type=submit]");
      if (!button) return;
      setTimeout(function () { button.disabled = true; button.textContent = form.dataset.busy; }, 0);
    });
  });
})();
