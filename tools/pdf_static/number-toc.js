(numbers) => {
  document.querySelectorAll('.course-pdf-toc .course-pdf-page').forEach((s, i) => {
    s.textContent = numbers[i] == null ? '' : String(numbers[i]);
  });
}
