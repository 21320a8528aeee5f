// Live updates for the console: the page listens to the receiver's event stream
// (the same NOTIFY hub as the agent API) and reloads when what it shows changed.
// It never reloads under the operator's fingers: while a form field is focused or
// has text, or on a later page of a list, it only says the page is out of date.
// It reloads at most once every MIN_RELOAD_MS: with hundreds of operations
// moving a second, the list would otherwise reload without pause.
(function () {
  "use strict";
  var MIN_RELOAD_MS = 2000;
  var loadedAt = Date.now();
  var pending = null;
  var live = document.body.getAttribute("data-live");
  if (!live || !window.EventSource) { return; }
  var status = document.getElementById("live-status");
  var url = "/console/stream" + (live === "*" ? "" : "?op=" + encodeURIComponent(live));
  var source = new EventSource(url);

  function busy() {
    var el = document.activeElement;
    if (el && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA")) {
      return true;
    }
    var fields = document.querySelectorAll("form.actions input[name=reason]");
    for (var i = 0; i < fields.length; i++) { if (fields[i].value) { return true; } }
    return new URLSearchParams(window.location.search).has("after");
  }

  function stale() {
    status.hidden = false;
    status.textContent = "";
    status.appendChild(document.createTextNode("Changed since this page was loaded. "));
    var link = document.createElement("a");
    link.href = window.location.pathname + window.location.search;
    link.textContent = "Reload";
    status.appendChild(link);
  }

  source.addEventListener("ready", function () { document.body.setAttribute("data-live-ready", "1"); });
  function reload() {
    pending = null;
    if (busy()) { stale(); return; }
    source.close();
    window.location.reload();
  }

  source.addEventListener("changed", function () {
    if (pending !== null) { return; }  // a reload is already coming
    pending = window.setTimeout(reload, Math.max(0, loadedAt + MIN_RELOAD_MS - Date.now()));
  });
  source.addEventListener("signed_out", function () {
    if (pending !== null) { window.clearTimeout(pending); pending = null; }
    source.close();
    status.hidden = false;
    status.textContent = "Your session ended: sign in again.";
  });
})();
