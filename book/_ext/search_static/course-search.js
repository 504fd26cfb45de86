/* The search page's summaries with math as plain text (book/_ext/course_search.py).
 *
 * Sphinx's searchtools.js cuts each summary from the hit's page text (Search.htmlToText),
 * where math is still MathJax's TeX source. Every math element of the site carries its
 * plain-text reading in data-course-text (written at build time); this wraps htmlToText so that
 * text replaces the TeX before the summary is cut, and code (cells, outputs, code blocks) is
 * left out of it where the words searched for are in the prose (where they are only in code,
 * the summary shows that code). Served on search.html only.
 */
(() => {
  "use strict";
  const CODE =
    "div.cell_input, div.cell_output, div.highlight, pre, details.hide > summary, .sd-tab-set > label";
  const patch = () => {
    if (typeof Search === "undefined" || Search.courseSearchPatched) return;
    const htmlToText = Search.htmlToText;
    let keepCode = false;
    Search.htmlToText = (htmlString, anchor) => {
      const doc = new DOMParser().parseFromString(htmlString, "text/html");
      // A summary is prose: code cells, their outputs and code blocks are left out of it
      // (unless the words searched for are only in the code: makeSearchSummary below).
      if (!keepCode) doc.querySelectorAll(CODE).forEach((el) => { el.remove(); });
      doc.querySelectorAll("[data-course-text]").forEach((el) => {
        const text = el.getAttribute("data-course-text");
        // display math stands apart from the sentence around it
        el.replaceWith(doc.createTextNode(el.tagName === "DIV" ? ` ${text} ` : text));
      });
      return htmlToText(doc.documentElement.outerHTML, anchor);
    };
    const makeSearchSummary = Search.makeSearchSummary;
    if (makeSearchSummary) {
      Search.makeSearchSummary = (htmlText, keywords, anchor) => {
        const prose = Search.htmlToText(htmlText, anchor).toLowerCase();
        if ([...keywords].some((k) => prose.includes(String(k).toLowerCase())))
          return makeSearchSummary(htmlText, keywords, anchor);
        keepCode = true;  // found in the code only: the summary shows where
        try {
          return makeSearchSummary(htmlText, keywords, anchor);
        } finally {
          keepCode = false;
        }
      };
    }
    Search.courseSearchPatched = true;
  };
  patch();  // searchtools.js came first
  document.addEventListener("DOMContentLoaded", patch);  // or comes later (deferred)
})();
