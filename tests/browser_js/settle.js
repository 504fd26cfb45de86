async (limitMs) => {
  // What the next check or screenshot reads has finished: a frame laid out after the last
  // change (a resize picks <picture> sources, a colour scheme restyles), the CSS transitions
  // that change started run to their end, the fonts loaded, and every image loaded and decoded.
  // Returns the images still not complete after limitMs (a broken server, not a slow one), []
  // when all are.
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  let timer;
  const limit = new Promise((r) => { timer = setTimeout(r, limitMs); });
  await frame();
  await frame();
  // A colour scheme's change fades some colours in (sphinx-design's tab labels, 250 ms): axe's
  // contrast check read one mid-way once, under load. Wait out the running transitions' own
  // remaining time (a transition's finished promise can stay pending here: measured).
  const remaining = document
    .getAnimations()
    .filter((a) => a instanceof CSSTransition && a.playState === "running")
    .map((a) => a.effect.getComputedTiming().endTime - (a.currentTime ?? 0));
  const fade = Math.min(Math.max(0, ...remaining), limitMs);
  if (fade > 0) {
    await new Promise((r) => setTimeout(r, fade));
    await frame();
  }
  await document.fonts.ready;
  const settled = (img) =>
    (img.complete
      ? Promise.resolve()
      : new Promise((r) => {
          img.addEventListener("load", r, {once: true});
          img.addEventListener("error", r, {once: true});
        })
    ).then(() => (img.naturalWidth ? img.decode().catch(() => null) : null));
  // A resize may switch a <picture>'s source after the first pass: settle until nothing is
  // pending.
  for (let round = 0; round < 5; round++) {
    const imgs = [...document.images];
    await Promise.race([Promise.all(imgs.map(settled)), limit]);
    await frame();
    if ([...document.images].every((i) => i.complete)) break;
  }
  clearTimeout(timer);
  return [...document.images].filter((i) => !i.complete).map((i) => i.currentSrc || i.src);
}
