() => {
  const out = {clipped: [], wide: [], pageWidth: document.documentElement.scrollWidth,
               viewport: document.documentElement.clientWidth};
  const article = document.querySelector('article') || document.body;
  const shown = el => el.getClientRects().length > 0;  // not in a closed dropdown
  const text = el => JSON.stringify((el.textContent || el.getAttribute('alt') || '').trim().slice(0, 50));
  const bar = a => { const cs = getComputedStyle(a);
    return a.offsetHeight - a.clientHeight - parseFloat(cs.borderTopWidth) - parseFloat(cs.borderBottomWidth); };
  // What a box shows that does not fit: content past its right edge, and how the box treats it.
  const judge = (what, box, excess) => {
    if (excess <= 1) return;
    const x = getComputedStyle(box).overflowX;
    if (x === 'hidden' || x === 'clip')
      out.clipped.push(`${what}: ${Math.round(excess)}px cut off (overflow ${x})`);
    else if ((x === 'auto' || x === 'scroll') && bar(box) < 3)
      out.clipped.push(`${what}: scrolls ${Math.round(excess)}px with no visible scrollbar`);
  };
  // Math: measure the typeset formula (mjx-math), not the container's scrollWidth, which the
  // hidden MathML copy for screen readers inflates.
  for (const c of article.querySelectorAll('mjx-container')) {
    const m = c.querySelector('mjx-math');
    if (!m || !shown(c)) continue;
    const display = c.getAttribute('display') === 'true';
    const box = display ? c : (c.closest('span.math') || c);
    const excess = m.getBoundingClientRect().right - box.getBoundingClientRect().right
                   + (display ? box.scrollLeft : 0);
    judge(`${display ? 'equation' : 'inline math'} ${text(c.querySelector('mjx-assistive-mml') || c)}`,
          box, excess);
  }
  // Code, outputs, tables: the nearest box that does not let them spill.
  const seen = new Set();
  for (const el of article.querySelectorAll('div.highlight pre, div.cell_output pre, ' +
                                            'div.cell_output .output, table')) {
    if (!shown(el) || el.querySelector('mjx-container')) continue;
    for (let a = el; a && a !== article.parentElement; a = a.parentElement) {
      if (getComputedStyle(a).overflowX === 'visible' || a.scrollWidth <= a.clientWidth + 1) continue;
      if (!seen.has(a)) {
        seen.add(a);
        judge(`${el.closest('.cell_output') ? 'output' : el.tagName === 'TABLE' ? 'table' : 'code'} ${text(el)}`,
              a, a.scrollWidth - a.clientWidth);
      }
      break;
    }
  }
  if (out.pageWidth > out.viewport + 1) {
    // what sticks out: the outermost elements past the right edge, not inside a scroller
    for (const el of article.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.right <= out.viewport + 1 || r.width === 0) continue;
      let inside = false;
      for (let a = el.parentElement; a && a !== document.body; a = a.parentElement)
        if (getComputedStyle(a).overflowX !== 'visible') { inside = true; break; }
      if (inside || (el.parentElement && el.parentElement.getBoundingClientRect().right > out.viewport + 1)) continue;
      out.wide.push(`<${el.tagName.toLowerCase()} class="${el.className}"> ${text(el)} ends at ${Math.round(r.right)}px`);
      if (out.wide.length >= 5) break;
    }
  }
  return out;
}
