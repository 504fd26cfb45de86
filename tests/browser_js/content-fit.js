async () => {
  // What a reader sees of the content at this viewport: table cell gaps and precision, display
  // equations against the column, code boxes that scroll, figure tick labels' rendered sizes and
  // explorer controls. Waits for what it reads (MathJax typeset, images decoded, Vega drawn).
  const article = document.querySelector('article') || document.body;
  const shown = el => el.getClientRects().length > 0;
  const snip = s => (s || '').replace(/\s+/g, ' ').trim().slice(0, 60);
  if (document.querySelector('.math')) {  // MathJax loads deferred: wait for it to exist
    for (let i = 0; !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++) {
      if (i > 600) throw new Error('MathJax never started');
      await new Promise(r => setTimeout(r, 50));
    }
    await MathJax.startup.promise;
  }
  await Promise.all([...document.images].map(i => i.decode().catch(() => null)));
  // Significant digits a number shows ("0.01249" 4, "1.000" 4, "−1.768×10−5" 4); null for
  // integers, exact zeros and text.
  const sigDigits = (txt) => {
    const m = txt.replace(/\s/g, '').match(/^[−\-+]?(\d+\.\d+)(?:[×x]10[−\-+]?\d+)?$/);
    if (!m) return null;
    const digits = m[1].replace('.', '').replace(/^0+/, '');
    return digits && /[1-9]/.test(digits) ? digits.length : null;
  };
  const out = {tables: [], equations: [], code: [], ticks: [], controls: [], explorers: [],
               column: article.clientWidth};

  // Tables: the smallest gap between neighbouring cells' text (padding + spacing).
  for (const t of article.querySelectorAll('table')) {
    if (!shown(t) || t.closest('.highlight')) continue;
    let gap = Infinity, cells = 0;
    const ts = getComputedStyle(t);
    const spacing = ts.borderCollapse === 'collapse' ? 0 : parseFloat(ts.borderSpacing) || 0;
    const digits = new Set();
    for (const row of t.rows) {
      const cs = [...row.cells];
      for (let i = 0; i < cs.length; i++) {
        const txt = cs[i].textContent.trim();
        const d = sigDigits(txt);
        if (d) digits.add(d);
        if (i === 0) continue;
        const a = getComputedStyle(cs[i - 1]), b = getComputedStyle(cs[i]);
        // the least room between the two texts (right-aligned numbers may have more)
        const g = parseFloat(a.paddingRight) + parseFloat(b.paddingLeft) + spacing;
        gap = Math.min(gap, g); cells++;
      }
    }
    if (cells) out.tables.push({gap: Math.round(gap * 10) / 10, digits: [...digits].sort(),
                                output: !!t.closest('.cell_output'), text: snip(t.textContent)});
  }
  // Display equations: the typeset formula's width against the column's.
  for (const c of article.querySelectorAll('mjx-container[display="true"]')) {
    const m = c.querySelector('mjx-math');
    if (!m || !shown(c)) continue;
    const width = m.getBoundingClientRect().width, room = c.clientWidth;
    out.equations.push({width: Math.round(width), room, excess: Math.round(width - room),
                        text: snip((c.querySelector('mjx-assistive-mml') || c).textContent)});
  }
  // Code boxes: scrolling sideways.
  for (const pre of article.querySelectorAll('div.highlight pre')) {
    if (!shown(pre) || pre.closest('.cell_output, .output')) continue;
    const excess = pre.scrollWidth - pre.clientWidth;
    out.code.push({excess, text: snip(pre.textContent)});
  }
  // Figures (matplotlib SVG <img>): tick labels' font size as drawn.
  for (const img of article.querySelectorAll('img')) {
    const src = img.currentSrc || img.src;
    if (!src.split('?')[0].endsWith('.svg') || !shown(img)) continue;
    const text = await (await fetch(src)).text();
    const svg = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
    const vb = (svg.getAttribute('viewBox') || '').split(/\s+/).map(Number);
    if (vb.length < 4 || !vb[2]) continue;
    const scale = img.getBoundingClientRect().width / vb[2];
    let smallest = Infinity;
    for (const g of svg.querySelectorAll('g[id^="xtick_"] g[id^="text_"] > g, g[id^="ytick_"] g[id^="text_"] > g')) {
      const m = (g.getAttribute('transform') || '').match(/scale\(([\d.]+)/);
      if (m) smallest = Math.min(smallest, parseFloat(m[1]) * 100 * scale);
    }
    if (smallest < Infinity)
      out.ticks.push({px: Math.round(smallest * 10) / 10, src: src.split('/').pop().slice(0, 12),
                      figure: (img.closest('figure') || {}).id || ''});
  }
  // Explorers (Vega SVG): axis labels' font size as drawn.
  for (const svg of article.querySelectorAll('.vega-embed svg')) {
    if (!shown(svg)) continue;
    let smallest = Infinity;
    for (const t of svg.querySelectorAll('.role-axis-label text, .role-legend-label text')) {
      const h = parseFloat(getComputedStyle(t).fontSize) * (t.getScreenCTM() ? t.getScreenCTM().a : 1);
      smallest = Math.min(smallest, h);
    }
    if (smallest < Infinity) out.ticks.push({px: Math.round(smallest * 10) / 10, src: 'vega',
                                             figure: (svg.closest('.cell') || {}).id || ''});
  }
  // Explorers: the drawn chart's scale (the SVG shrinks to the column when wider).
  for (const view of article.querySelectorAll('.course-vega-view')) {
    const svg = view.querySelector('svg');
    if (!svg) continue;
    out.explorers.push({scale: Math.round(100 * svg.getBoundingClientRect().width /
                                          +svg.getAttribute('width')) / 100,
                        right: Math.round(svg.getBoundingClientRect().right)});
  }
  // Explorer controls: the gap between a binding's name and its widget.
  for (const b of article.querySelectorAll('.course-vega-controls .vega-bind')) {
    const name = b.querySelector('.vega-bind-name');
    const widget = b.querySelector('input, select');
    if (!name || !widget || !shown(widget)) continue;
    const r = document.createRange(); r.selectNodeContents(name);
    const n = r.getBoundingClientRect(), w = widget.getBoundingClientRect();
    // beside it: the gap to its left edge; below it (a wrapped line): apart by definition
    const gap = w.top >= n.bottom - 1 ? 99 : w.left - n.right;
    out.controls.push({gap: Math.round(gap), name: snip(name.textContent)});
  }
  return out;
}
