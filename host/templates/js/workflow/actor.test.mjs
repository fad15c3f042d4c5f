test('the workflow counts to its steps and once more', async () => {
  burrow('build');
  burrow('create', '--local', ACTOR, 'test', '{"steps": 3}');
  // Each command's host runs the workflow while it lives; a later one
  // resumes it where it was.
  let count;
  for (let i = 0; i < 100; i++) {
    count = burrow('call', '--local', ACTOR, 'test', 'count');
    if (count === '4') break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.equal(count, '4');
});
