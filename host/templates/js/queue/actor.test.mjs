test('a job is done once', () => {
  burrow('build');
  const send = (text) => burrow('send', '--local', ACTOR, 'test', 'job', JSON.stringify({ text }), '--wait');
  // `--wait` returns once the job's processing committed, with its result.
  assert.equal(send('hello'), 'HELLO');
  assert.equal(send('again'), 'AGAIN');
  assert.equal(burrow('call', '--local', ACTOR, 'test', 'processed'), '2');
});
