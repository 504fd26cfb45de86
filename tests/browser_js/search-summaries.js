() => [...document.querySelectorAll("#search-results li")].map((li) => ({
  title: (li.querySelector("a") || li).textContent.trim(),
  summary: (li.querySelector("p.context") || {textContent: ""}).textContent,
}))
