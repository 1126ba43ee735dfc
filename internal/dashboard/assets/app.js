// AnyHook dashboard: the few things plain HTML cannot do. Loaded from
// 'self' (no inline script), so the Content-Security-Policy stays strict.
"use strict";

// Confirm dangerous actions: <button data-confirm="…">.
document.addEventListener("click", function (e) {
  var b = e.target.closest("[data-confirm]");
  if (b && !window.confirm(b.getAttribute("data-confirm"))) {
    e.preventDefault();
  }
});

// Raw/pretty toggle of an event body: <button data-toggle="id1 id2">.
document.addEventListener("click", function (e) {
  var b = e.target.closest("[data-toggle]");
  if (!b) return;
  b.getAttribute("data-toggle").split(" ").forEach(function (id) {
    var el = document.getElementById(id);
    if (el) el.classList.toggle("hidden");
  });
  b.textContent = b.textContent === "show raw" ? "show pretty" : "show raw";
});

// Select all rows of a queue.
document.addEventListener("change", function (e) {
  if (e.target.id !== "select-all") return;
  document.querySelectorAll('input[name="id"]').forEach(function (c) {
    c.checked = e.target.checked;
  });
});

// Live event list: every 5 s, fetch the newest rows of the same filter
// and swap them in, while the "live" box is ticked and the tab is visible.
(function () {
  var table = document.querySelector("table[data-refresh]");
  var box = document.getElementById("live");
  var rows = document.getElementById("event-rows");
  if (!table || !box || !rows) return;
  var url = table.getAttribute("data-refresh");
  setInterval(function () {
    if (!box.checked || document.hidden) return;
    fetch(url, { headers: { "X-AnyHook-Partial": "1" }, credentials: "same-origin" })
      .then(function (r) {
        if (r.status === 401) { box.checked = false; return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (html) { if (html !== null) rows.innerHTML = html; })
      .catch(function () {});
  }, 5000);
})();
