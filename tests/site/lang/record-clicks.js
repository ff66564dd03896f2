// Every button's click on a language page, recorded in order (../record.js).
for (const button of document.querySelectorAll('button')) {
  button.addEventListener('click', () => record(button.textContent));
}
