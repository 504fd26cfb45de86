([id, name, value]) => {
  const controls = document.getElementById(id).querySelector(".course-vega-controls");
  const el = controls.querySelector(`select[name="${name}"], input[type=range][name="${name}"]`);
  if (el) {
    el.value = String(value);
    el.dispatchEvent(new Event("input", {bubbles: true}));
    el.dispatchEvent(new Event("change", {bubbles: true}));
    return true;
  }
  const radio = [...controls.querySelectorAll(`input[type=radio][name="${name}"]`)]
    .find((r) => r.value === String(value));
  if (radio) { radio.click(); return true; }
  return false;
}
