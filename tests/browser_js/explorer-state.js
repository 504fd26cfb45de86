async (id) => {
  const root = document.getElementById(id), view = root.courseVegaView;
  await view.runAsync();
  const names = Object.keys(view.getState({data: vega.truthy, signals: vega.falsy,
                                           recurse: false}).data);
  const plain = (r) => Object.fromEntries(
    Object.entries(r).filter(([, v]) => v === null || typeof v !== "object"));
  const params = Object.fromEntries([...root.querySelectorAll(".course-vega-controls [name]")]
    .map((el) => [el.name, view.signal(el.name)]));
  const title = root.querySelector(".course-vega-chart svg .role-title-text text");
  return {params, title: title && title.textContent,
          data: Object.fromEntries(names.map((n) => [n, view.data(n).map(plain)]))};
}
