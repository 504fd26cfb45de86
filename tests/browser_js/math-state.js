() => {
  const maths = [...document.querySelectorAll('.math')];
  const unrendered = maths.filter(e => !e.querySelector('mjx-container'))
                          .map(e => e.textContent.trim().slice(0, 60));
  const raw = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const skip = 'pre, code, script, style, textarea, .highlight, mjx-assistive-mml';
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n.textContent;
    if ((t.includes('\\(') || t.includes('\\[') || t.includes('$$')) && !n.parentElement.closest(skip))
      raw.push(t.trim().slice(0, 80));
  }
  // MathJax typesets a TeX error (unbalanced braces, extra \left) as an mjx-merror, and an
  // undefined macro as its own name in red (the noundefined extension).
  const errors = [...document.querySelectorAll('mjx-merror')]
                   .map(e => (e.getAttribute('data-mjx-error') || e.textContent).slice(0, 80))
    .concat([...document.querySelectorAll('mjx-mtext[style*="color: red"]')]
              .map(e => 'undefined macro: ' + (e.closest('mjx-container')
                  ?.querySelector('mjx-assistive-mml')?.textContent || '?').slice(0, 60)));
  return {count: maths.length, unrendered, raw, errors};
}
