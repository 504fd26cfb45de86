() => [...document.querySelectorAll("figure")].map((f) => {
  const pic = f.querySelector("picture.course-narrow-figure");
  const img = f.querySelector("img");
  const src = pic && pic.querySelector("source");
  const link = img && img.closest("a.course-zoom");
  const num = f.querySelector("figcaption .caption-number");
  const cap = f.querySelector("figcaption .caption-text");
  return {
    id: f.id, narrow: !!pic,
    current: img && img.currentSrc, wide: img && img.src,
    narrowSrc: src && new URL(src.getAttribute("srcset"), document.baseURI).href,
    natural: img && img.naturalWidth, shown: img && img.getBoundingClientRect().width,
    right: img && img.getBoundingClientRect().right, complete: img && img.complete,
    alt: img && img.getAttribute("alt"), link: link && link.href,
    number: num && num.textContent.trim(), caption: cap && cap.textContent.trim(),
    panels: pic && +pic.dataset.panels, grid: pic && pic.dataset.grid,
    tickPt: pic && +pic.dataset.tickPt,
  };
})
