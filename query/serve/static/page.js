// The search page's only script, loaded from this server (the Content-Security-Policy allows no other):
// "/" moves the focus to the search box, as on many search pages. The page works without it.
"use strict";
document.addEventListener("keydown", (event) => {
  const box = document.getElementById("q");
  const typing = event.target instanceof HTMLElement && event.target.closest("input, textarea, select");
  if (box && event.key === "/" && !typing && !event.ctrlKey && !event.metaKey && !event.altKey) {
    event.preventDefault();
    box.focus();
    box.select();
  }
});
