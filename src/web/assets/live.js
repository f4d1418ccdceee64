// tollgate web view: live updates. The page works without this script; with it, the server's
// events replace the fragments that changed (by id), without reloading the page.
(function () {
  "use strict";
  var root = document.querySelector("[data-events]");
  if (!root || !window.EventSource) { return; }
  var source = new EventSource(root.getAttribute("data-events"));
  source.addEventListener("fragments", function (event) {
    var fragments = JSON.parse(event.data);
    Object.keys(fragments).forEach(function (id) {
      var element = document.getElementById(id);
      if (element && element.outerHTML !== fragments[id]) {
        element.outerHTML = fragments[id];
      }
    });
    root.setAttribute("data-updated", new Date().toISOString());
  });
})();
