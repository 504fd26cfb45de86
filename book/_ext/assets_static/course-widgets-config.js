// Served by book/_ext/course_assets.py: glue between the site and the widget manager.
(function () {
  // The manager loads its icon fonts from next to its own AMD module; without this RequireJS
  // places that module beside the page, and the fonts 404.
  var src = document.currentScript.src;
  require.config({paths: {"@jupyter-widgets/html-manager/dist": src.slice(0, src.lastIndexOf("/"))}});
  // It typesets widget labels with MathJax 2's API (MathJax.Hub.Queue); the site runs MathJax 3.
  function hub() {
    return {Queue: function (job) {
      var el = job && job[2];
      if (el && window.MathJax && window.MathJax.typesetPromise) window.MathJax.typesetPromise([el]);
    }};
  }
  window.MathJax = window.MathJax || {};
  var config = window.MathJax;
  config.Hub = hub();  // until MathJax 3 loads, window.MathJax is its configuration
  config.startup = config.startup || {};
  var ready = config.startup.ready;
  config.startup.ready = function () {
    if (ready) ready(); else window.MathJax.startup.defaultReady();
    window.MathJax.Hub = hub();  // MathJax 3 has replaced the object by now
  };
  // A slider's handle (noUiSlider, role="slider") is what a screen reader focuses, but the
  // manager gives it no name: name each after its widget's label, or the widget's tooltip.
  function nameSliders() {
    document.querySelectorAll('.noUi-handle[role="slider"]:not([aria-label])').forEach(function (h) {
      var w = h.closest('.widget-slider, .jupyter-widget-slider, .widget-inline-hbox');
      var label = w && w.querySelector('.widget-label');
      var text = (label && label.textContent.trim()) || (w && w.getAttribute('title')) || 'value';
      h.setAttribute('aria-label', text);
    });
  }
  new MutationObserver(nameSliders).observe(document.documentElement, {childList: true, subtree: true});
})();
