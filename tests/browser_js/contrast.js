(minimum) => {
  const rgb = c => (c.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
                               return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const bg = el => { for (let a = el; a; a = a.parentElement) { const c = rgb(getComputedStyle(a).backgroundColor);
                       if (c.length === 3 || c[3] > 0.5) return c.slice(0, 3); } return [255, 255, 255]; };
  const low = [];
  let checked = 0;
  for (const el of document.querySelectorAll('article caption, article figcaption')) {
    if (!el.getClientRects().length || !el.textContent.trim()) continue;
    checked++;
    const fg = rgb(getComputedStyle(el).color).slice(0, 3), back = bg(el);
    const [hi, lo] = [lum(fg), lum(back)].sort((x, y) => y - x);
    const ratio = (hi + 0.05) / (lo + 0.05);
    if (ratio < minimum) low.push(`${JSON.stringify(el.textContent.trim().slice(0, 40))}: ${ratio.toFixed(2)}:1`);
  }
  return {checked, low};
}
