// What a test page's handlers did, in order: window.events for the test, and a list on the page for a person.
const events = [];
window.events = events;
function record(what) {
  events.push(what);
  const li = document.createElement('li');
  li.textContent = what;
  document.getElementById('log').append(li);
}
