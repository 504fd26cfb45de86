/* The search page's summaries with math as plain text (book/_ext/course_search.py).
 *
 * Sphinx's searchtools.js cuts each summary from the hit's page text (Search.htmlToText),
 * where math is still MathJax's TeX source. Every math element of the site carries its
 * plain-text reading in data-course-text (written at build time); this wraps htmlToText so that
 * text replaces the TeX before the summary is cut. Served on search.html only.
 */
(() => {
  "use strict";
  const patch = () => {
    if (typeof Search === "undefined" || Search.courseSearchPatched) return;
    const htmlToText = Search.htmlToText;
    Search.htmlToText = (htmlString, anchor) => {
      const doc = new DOMParser().parseFromString(htmlString, "text/html");
      const maths = doc.querySelectorAll("[data-course-text]");
      if (maths.length === 0) return htmlToText(htmlString, anchor);
      maths.forEach((el) => {
        const text = el.getAttribute("data-course-text");
        // display math stands apart from the sentence around it
        el.replaceWith(doc.createTextNode(el.tagName === "DIV" ? ` ${text} ` : text));
      });
      return htmlToText(doc.documentElement.outerHTML, anchor);
    };
    Search.courseSearchPatched = true;
  };
  patch();  // searchtools.js came first
  document.addEventListener("DOMContentLoaded", patch);  // or comes later (deferred)
})();
