// capmesh dashboard: keeps the registry table live. The server renders and
// escapes every row; this script only asks for them again when the event
// stream (the node's ipc.watch, relayed) says the registry changed.
"use strict";
(function () {
  var table = document.getElementById("registry");
  var live = document.getElementById("live");
  if (!table || !window.EventSource) {
    if (live) { live.textContent = "static"; }
    return;
  }
  var rows = document.getElementById("registry-rows");
  var revision = document.getElementById("revision");
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch("/ui/registry/rows", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        var rev = r.headers.get("X-Registry-Revision");
        return r.text().then(function (html) {
          rows.innerHTML = html;
          if (rev) { table.dataset.revision = rev; revision.textContent = rev; }
          document.getElementById("providers").textContent = String(rows.querySelectorAll("tr.provider").length);
          document.getElementById("trusted").textContent = String(rows.querySelectorAll("tr.provider.trusted").length);
          document.body.dataset.updates = String(Number(document.body.dataset.updates || "0") + 1);
        });
      })
      .catch(function (e) { live.textContent = "update failed: " + e.message; live.className = "badge bad"; })
      .then(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  var es = new EventSource("/ui/events?since=" + encodeURIComponent(table.dataset.revision || "0"));
  es.addEventListener("hello", function () {
    live.textContent = "live"; live.className = "badge ok"; document.body.dataset.live = "1";
  });
  es.addEventListener("registry", refresh);
  es.onerror = function () { live.textContent = "reconnecting…"; live.className = "badge"; document.body.dataset.live = "0"; };
})();
