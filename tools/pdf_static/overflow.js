() => {
  const out = [];
  const col = (document.querySelector('article.bd-article') || document.body)
    .getBoundingClientRect();
  document.querySelectorAll('pre, mjx-container[display="true"], table, img, svg, ' +
                            'div.cell_output .text_html').forEach(el => {
    if (el.closest('mjx-assistive-mml, .course-pdf-cover')) return;
    if (el.tagName.toLowerCase() === 'svg' && el.closest('mjx-container')) return;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) return;
    let clipped, outside;
    if (el.tagName.toLowerCase() === 'mjx-container') {
      // A display equation is laid out (and scaled, prepare.js) within its paragraph's width.
      clipped = el.scrollWidth > el.parentElement.clientWidth + 2;
      outside = false;
    } else {
      clipped = el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0;
      outside = r.right > col.right + 1 || r.left < col.left - 1;
    }
    if (clipped || outside) {
      const sec = el.closest('section[id]');
      out.push(el.tagName.toLowerCase() + ' in #' + (sec ? sec.id : '?') + ': ' +
               (el.textContent || el.getAttribute('alt') || '').trim().slice(0, 60));
    }
  });
  return out;
}
