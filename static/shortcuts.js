// Keyboard shortcuts, listed on the pages that have them. Never while typing in a field: a
// checkbox, radio button or button with the focus takes no text, so the keys still work there.
(function () {
  var UNTYPED = /^(checkbox|radio|button|submit|reset|image|range|color)$/;
  function typing(el) {
    if (!el) return false;
    if (el.isContentEditable || /^(TEXTAREA|SELECT)$/.test(el.tagName)) return true;
    return el.tagName === "INPUT" && !UNTYPED.test(el.type);
  }
  function rows() { return Array.from(document.querySelectorAll("[data-row-link]")); }
  // The row holding the focus (its link, its checkbox or anything else in it), or -1.
  function current(links) {
    var el = document.activeElement;
    var row = el && el.closest ? el.closest("tr") : null;
    return links.findIndex(function (link) {
      return link === el || (row !== null && link.closest("tr") === row);
    });
  }
  function move(step) {
    var links = rows();
    if (!links.length) return;
    var at = current(links);
    var next = at < 0 ? 0 : Math.min(Math.max(at + step, 0), links.length - 1);
    links[next].focus();
  }
  function tick() {
    var links = rows();
    var at = current(links);
    var box = at < 0 ? null : links[at].closest("tr").querySelector("input[type=checkbox]");
    if (box) box.click();
  }
  function follow(key) {
    var el = document.querySelector('[data-shortcut="' + key + '"]');
    if (el && !el.hasAttribute("aria-disabled")) el.click();
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (event.key === "j") { move(1); event.preventDefault(); }
    else if (event.key === "k") { move(-1); event.preventDefault(); }
    else if (event.key === "x") { tick(); event.preventDefault(); }
    else if (event.key === "/") {
      var search = document.querySelector("[data-testid=search]");
      if (search) { search.focus(); event.preventDefault(); }
    } else if (event.key === "a" || event.key === "d") { follow(event.key); }
  });
})();
