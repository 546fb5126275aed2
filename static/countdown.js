// Live "expires in" countdowns for <time data-countdown="ISO-8601">. Server text is the fallback.
(function () {
  function render(el) {
    var ms = Date.parse(el.dataset.countdown) - Date.now();
    if (ms <= 0) { el.textContent = "expired"; el.classList.add("expired"); return; }
    var s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    el.textContent = (h ? h + "h " : "") + m + "m " + (s % 60) + "s";
  }
  function tick() { document.querySelectorAll("time[data-countdown]").forEach(render); }
  tick();
  setInterval(tick, 1000);
})();
