() => {
  const status = document.querySelector("#search-results .search-summary, p.search-summary");
  if (status === null || !/found|did not match/i.test(status.textContent)) return false;
  return [...document.querySelectorAll("#search-results li")]
    .every((li) => li.querySelector("p.context, span") !== null);
}
