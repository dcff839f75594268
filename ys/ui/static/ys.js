// The dashboard's own script (no build step): relative times kept current, a confirmation
// before each action, live regions kept alive when the daemon goes away and comes back.
(function () {
  "use strict";

  function fmt(s) {
    s = Math.abs(s);
    if (s < 10) return s.toFixed(1) + "s";
    if (s < 60) return Math.round(s) + "s";
    var m = Math.floor(s / 60), sec = Math.floor(s % 60);
    if (m < 60) return m + "m" + (m < 10 && sec ? " " + sec + "s" : "");
    var h = Math.floor(m / 60);
    if (h < 24) return h + "h" + (m % 60 ? " " + (m % 60) + "m" : "");
    var d = Math.floor(h / 24);
    return d + "d" + (h % 24 ? " " + (h % 24) + "h" : "");
  }

  function relative(mode, secs) {
    if (mode === "elapsed") return fmt(-secs);
    if (mode === "left") return secs > 0 ? fmt(secs) + " left" : "expired";
    if (Math.abs(secs) < 1) return "now";
    return secs > 0 ? "in " + fmt(secs) : fmt(secs) + " ago";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-rel]").forEach(function (t) {
      var at = Date.parse(t.getAttribute("datetime"));
      var rel = t.querySelector(".rel");
      if (isNaN(at) || !rel) return;
      var text = relative(t.getAttribute("data-rel"), (at - now) / 1000);
      if (rel.textContent !== text) rel.textContent = text;
    });
  }

  function followLogs() {
    document.querySelectorAll("pre.log[data-live]").forEach(function (p) {
      p.scrollTop = p.scrollHeight;
    });
  }

  // Each action form asks first; the server asks on a page of its own without this script.
  document.addEventListener("submit", function (ev) {
    var form = ev.target, question = form.getAttribute("data-confirm");
    if (!question) return;
    if (!window.confirm(question)) { ev.preventDefault(); return; }
    var confirmed = form.querySelector("input[name=confirm]");
    if (confirmed) confirmed.value = "1";
  });

  // A live region whose long poll failed: reload on 403 (the session is gone, the page says
  // what to do), else try again in a few seconds (the daemon may be restarting).
  document.addEventListener("htmx:afterRequest", function (ev) {
    var elt = ev.detail.elt;
    if (!elt || elt.id !== "live" || ev.detail.successful) return;
    if (ev.detail.xhr && ev.detail.xhr.status === 403) { window.location.reload(); return; }
    setTimeout(function () {
      if (document.body.contains(elt)) window.htmx.trigger(elt, "ys-retry");
    }, 3000);
  });

  // A picture's shape says what it is (its exact times, its error) on hover and on focus.
  function showTip(ev) {
    var shape = ev.target.closest && ev.target.closest("[data-tip]");
    if (!shape) return;
    var box = shape.closest(".chart-box"), tip = box && box.querySelector(".tip");
    if (tip) tip.textContent = shape.getAttribute("data-tip");
  }
  document.addEventListener("mouseover", showTip);
  document.addEventListener("focusin", showTip);

  document.addEventListener("htmx:afterSettle", function () { tick(); followLogs(); });
  document.addEventListener("DOMContentLoaded", function () { tick(); followLogs(); });
  setInterval(tick, 1000);
})();
