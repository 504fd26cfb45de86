async () => {
  // What a reader sees of the content at this viewport: table cell gaps and precision, display
  // equations against the column, code boxes that scroll, figure texts' rendered sizes and
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
  const out = {tables: [], equations: [], code: [], outputs: [], cells: [], ticks: [],
               figures: [], numbers: [], controls: [], explorers: [], column: article.clientWidth};

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
  // Outputs (printed text, HTML tables): how far the widest box inside each scrolls sideways.
  for (const o of article.querySelectorAll('div.cell_output')) {
    if (!shown(o)) continue;
    const boxes = [o, ...o.querySelectorAll('*')].filter(
      b => b.tagName !== 'IMG' && !b.closest('svg, mjx-container, .course-vega-explorer') &&
           /auto|scroll/.test(getComputedStyle(b).overflowX));
    if (!boxes.length && !o.querySelector('pre, table')) continue;  // a figure, an explorer
    const excess = Math.max(0, ...boxes.map(b => b.scrollWidth - b.clientWidth));
    out.outputs.push({excess, text: snip(o.textContent)});
  }
  // Every cell's code and output text (an exception printed on the page shows in the output;
  // a lesson that catches one names it in the code), and whether it wrote to stderr.
  for (const c of article.querySelectorAll('div.cell')) {
    const output = [...c.querySelectorAll('.cell_output')].map(o => o.textContent).join('\n');
    if (!output.trim()) continue;
    const input = c.querySelector('.cell_input');
    out.cells.push({input: input ? input.textContent.slice(0, 20000) : '',
                    output: output.slice(0, 20000),
                    stderr: !!c.querySelector('.cell_output .stderr, .cell_output .output.stderr')});
  }
  // Figures (SVG <img>, the one the <picture> chose at this width): every text's font size as
  // drawn, i.e. its size in the SVG times the image's shown scale. Matplotlib draws a text as
  // glyph outlines in <g id="text_N"><g transform="translate(..) scale(s -s)">: the text's
  // size is 100 s (a formula's sub- and superscripts are its glyphs at 70 %, not counted
  // apart); an SVG <text> has its font-size. The tick labels' smallest goes to `ticks` too.
  const fontPx = (style) => {
    const m = (style || '').match(/font(?:-size)?:\s*(?:[a-z-]+\s+)*([\d.]+)px/);
    return m ? parseFloat(m[1]) : null;
  };
  for (const img of article.querySelectorAll('img')) {
    const src = img.currentSrc || img.src;
    if (!src.split('?')[0].endsWith('.svg') || !shown(img)) continue;
    const text = await (await fetch(src)).text();
    const svg = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
    const vb = (svg.getAttribute('viewBox') || '').split(/\s+/).map(Number);
    if (vb.length < 4 || !vb[2]) continue;
    const scale = img.getBoundingClientRect().width / vb[2];
    let tick = Infinity, smallest = Infinity, label = '', texts = 0, tickTexts = 0;
    for (const g of svg.querySelectorAll('g[id^="text_"]')) {
      const inner = [...g.children].find(
        c => c.tagName === 'g' && /scale\(/.test(c.getAttribute('transform') || ''));
      if (!inner) continue;
      const m = inner.getAttribute('transform').match(/scale\(([\d.e-]+)/);
      const px = Math.abs(parseFloat(m[1])) * 100 * scale;
      texts++;
      if (g.closest('g[id^="xtick_"], g[id^="ytick_"]')) {
        tick = Math.min(tick, px);
        tickTexts++;
      }
      if (px < smallest) {
        smallest = px;
        const c = [...g.childNodes].find(n => n.nodeType === Node.COMMENT_NODE);
        label = snip(c ? c.textContent : '');
      }
    }
    for (const t of svg.querySelectorAll('text')) {
      const size = fontPx(t.getAttribute('style')) || parseFloat(t.getAttribute('font-size'));
      if (!size || !t.textContent.trim()) continue;
      texts++;
      if (size * scale < smallest) { smallest = size * scale; label = snip(t.textContent); }
    }
    if (!texts) continue;
    const r1 = x => x < Infinity ? Math.round(x * 10) / 10 : null;
    const figure = img.closest('figure');
    const caption = figure && figure.querySelector('figcaption .caption-number');
    out.figures.push({px: r1(smallest), text: label, texts, tickTexts,
                      src: src.split('/').pop().slice(0, 12), figure: (figure || {}).id || '',
                      number: caption ? caption.textContent.trim() : ''});
    if (tick < Infinity) out.ticks.push({px: r1(tick), src: src.split('/').pop().slice(0, 12),
                                         figure: (figure || {}).id || ''});
    // Numbers written in a figure (a heatmap's cells, a bar's value), tick labels aside: the
    // space between two on one line, in px as shown and in ems of their text. Drawn in a
    // hidden copy of the SVG so the browser measures the glyphs.
    const numeric = g => {
      const c = [...g.childNodes].find(n => n.nodeType === Node.COMMENT_NODE);
      return c && /^\s*[−\-+]?(\d+\.?\d*|\.\d+)\s*%?\s*$/.test(c.textContent) ? c.textContent.trim() : null;
    };
    const host = document.createElement('div');
    host.style.cssText = 'position:absolute;left:-20000px;top:0;visibility:hidden;';
    const copy = document.importNode(svg, true);
    copy.setAttribute('width', vb[2]); copy.setAttribute('height', vb[3]);  // 1 px per unit
    host.append(copy);
    document.body.append(host);
    const nums = [];
    for (const g of copy.querySelectorAll('g[id^="text_"]')) {
      const t = numeric(g);
      if (!t || g.closest('g[id^="xtick_"], g[id^="ytick_"]')) continue;
      const r = g.getBoundingClientRect();
      const inner = [...g.children].find(c => /scale\(/.test(c.getAttribute('transform') || ''));
      const m = inner && inner.getAttribute('transform').match(/scale\(([\d.e-]+)/);
      if (!m || !r.width) continue;
      nums.push({t, left: r.left, right: r.right, top: r.top, bottom: r.bottom,
                 em: Math.abs(parseFloat(m[1])) * 100});
    }
    host.remove();
    let gapEm = Infinity, gapPx = Infinity, pair = '';
    for (let i = 0; i < nums.length; i++) {
      for (let j = 0; j < nums.length; j++) {
        const a = nums[i], b = nums[j];
        if (i === j || b.left < a.left) continue;
        const overlap = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (overlap < 0.5 * Math.min(a.bottom - a.top, b.bottom - b.top)) continue;  // not one line
        const gap = b.left - a.right;
        const em = gap / Math.min(a.em, b.em);
        if (em < gapEm) { gapEm = em; gapPx = gap * scale; pair = `${a.t} ${b.t}`; }
      }
    }
    if (nums.length > 1 && gapEm < Infinity)
      out.numbers.push({gapEm: Math.round(gapEm * 100) / 100, gapPx: r1(gapPx), pair,
                        count: nums.length, figure: (figure || {}).id || '',
                        number: caption ? caption.textContent.trim() : ''});
  }
  // Explorers (Vega SVG): every text's font size as drawn (axis and legend labels, titles).
  for (const svg of article.querySelectorAll('.vega-embed svg')) {
    if (!shown(svg)) continue;
    let smallest = Infinity;
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim() || !t.getClientRects().length) continue;
      const m = t.getScreenCTM();  // rotated titles too: the matrix's scale, not its .a
      const scale = m ? Math.sqrt(Math.abs(m.a * m.d - m.b * m.c)) : 1;
      const h = parseFloat(getComputedStyle(t).fontSize) * scale;
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
