async () => {
  const imgs = [...document.images];
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => {
    i.addEventListener('load', r); i.addEventListener('error', r); setTimeout(r, 15000); })));
  return imgs.map(i => ({src: i.currentSrc || i.src, width: i.naturalWidth,
    shown: i.getBoundingClientRect().width,
    output: !!i.closest('.cell_output, figure'), link: !!i.closest('a[href]'),
    alt: (i.getAttribute('alt') || '').trim(),
    caption: !!(i.closest('figure') && i.closest('figure').querySelector('figcaption')
                && i.closest('figure').querySelector('figcaption').textContent.trim())}));
}
