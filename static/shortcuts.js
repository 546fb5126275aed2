// Keyboard shortcuts, listed on the pages that have them. Never while typing in a field.
(function () {
  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }
  function rows() { return Array.from(document.querySelectorAll("[data-row-link]")); }
  function move(step) {
    var links = rows();
    if (!links.length) return;
    var at = links.indexOf(document.activeElement);
    var next = at < 0 ? 0 : Math.min(Math.max(at + step, 0), links.length - 1);
    links[next].focus();
  }
  function follow(key) {
    var el = document.querySelector('[data-shortcut="' + key + '"]');
    if (el && !el.hasAttribute("aria-disabled")) el.click();
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (event.key === "j") { move(1); event.preventDefault(); }
    else if (event.key === "k") { move(-1); event.preventDefault(); }
    else if (event.key === "/") {
      var search = document.querySelector("[data-testid=search]");
      if (search) { search.focus(); event.preventDefault(); }
    } else if (event.key === "a" || event.key === "d") { follow(event.key); }
  });
})();
