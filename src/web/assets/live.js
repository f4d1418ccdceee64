// tollgate web view: live updates. The page works without this script; with it, the server's
// events replace the fragments that changed (by id), without reloading the page. A list the user
// opened (a <details>) stays open across the swap.
(function () {
  "use strict";
  var root = document.querySelector("[data-events]");
  if (!root || !window.EventSource) { return; }
  var openLists = function (element) {
    var open = [];
    element.querySelectorAll("details").forEach(function (details, index) {
      if (details.open) { open.push(index); }
    });
    return open;
  };
  var source = new EventSource(root.getAttribute("data-events"));
  source.addEventListener("fragments", function (event) {
    var fragments = JSON.parse(event.data);
    Object.keys(fragments).forEach(function (id) {
      var element = document.getElementById(id);
      // The server sends only fragments that changed (it knows what the page was drawn with).
      if (!element) { return; }
      var open = openLists(element);
      element.outerHTML = fragments[id];
      var swapped = document.getElementById(id);
      if (!swapped) { return; }
      var lists = swapped.querySelectorAll("details");
      open.forEach(function (index) {
        if (lists[index]) { lists[index].open = true; }
      });
    });
    root.setAttribute("data-updated", new Date().toISOString());
  });
})();
