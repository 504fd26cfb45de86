() => {
  // Characters of the book that no installed font can draw: Chromium prints them as empty
  // boxes. Each character outside ASCII is drawn on a canvas in its element's font and compared
  // with a character that no font has (a private-use code point): the same pixels, no glyph.
  const root = document.querySelector('article.bd-article') || document.body;
  const skip = /[\p{C}\p{Z}\p{M}]/u;  // format characters, spaces, combining marks
  const canvas = document.createElement('canvas');
  canvas.width = 64; canvas.height = 64;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const draw = (ch, family) => {
    ctx.clearRect(0, 0, 64, 64);
    ctx.font = `40px ${family}`;
    ctx.fillStyle = '#000';
    ctx.textBaseline = 'middle';
    ctx.fillText(ch, 4, 32);
    return ctx.getImageData(0, 0, 64, 64).data.join(',');
  };
  const tofu = new Map();  // family -> pixels of a character no font has
  const found = new Map();
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || el.closest('mjx-container, script, style, .course-pdf-cover')) continue;
    let family = null;
    for (const ch of n.data) {
      if (ch.codePointAt(0) < 0x80 || skip.test(ch) || found.has(ch)) continue;
      family = family || getComputedStyle(el).fontFamily;
      if (!tofu.has(family)) tofu.set(family, draw('\u{10FFFD}', family));
      found.set(ch, draw(ch, family) === tofu.get(family));
    }
  }
  return [...found].filter(([, missing]) => missing).map(([ch]) => ch);
}
