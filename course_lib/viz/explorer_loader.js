(function () {
  var root = document.getElementById(%(id)s);
  var spec = %(spec)s;
  var opts = {actions: false, renderer: "svg",
              bind: root.querySelector(".course-vega-controls")};
  // Charts side by side (hconcat) wider than the column are stacked (vconcat) instead, so a
  // phone shows them at full size rather than scaled down to two thirds.
  function stacked(s) {
    var out = Object.assign({}, s, {vconcat: s.hconcat});
    delete out.hconcat;
    return out;
  }
  function embed(vegaEmbed) {
    var view = root.querySelector(".course-vega-view");
    vegaEmbed(view, spec, opts).then(function (result) {
      var svg = view.querySelector("svg");
      var wide = svg && +svg.getAttribute("width") > view.clientWidth + 1;
      if (wide && spec.hconcat) {
        result.finalize();
        root.querySelector(".course-vega-controls").textContent = "";
        spec = stacked(spec);
        return embed(vegaEmbed);
      }
      root.courseVegaView = result.view;  // the live view (read by the browser tests)
      root.setAttribute("data-ready", "true");
    }).catch(function (err) {
      root.querySelector(".course-vega-view").textContent = "The explorer failed to load: " + err;
    });
  }
  function start() {
    if (window.vegaEmbed) return embed(window.vegaEmbed);  // the site serves the libraries
    // A live notebook (Jupyter, Colab): load them from a CDN.
    var cdn = "https://cdn.jsdelivr.net/npm/", libs = %(libs)s;
    if (typeof define === "function" && define.amd && window.require) {  // RequireJS page
      const paths = {};
      libs.forEach(function (lib) { paths[lib.split("@")[0]] = cdn + lib + "?noext"; });
      window.require.config({paths: paths});
      return window.require(["vega-embed"], embed);
    }
    var i = 0;
    (function next() {
      if (i === libs.length) return embed(window.vegaEmbed);
      var s = document.createElement("script");
      s.src = cdn + libs[i++];
      s.onload = next;
      document.head.appendChild(s);
    })();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
