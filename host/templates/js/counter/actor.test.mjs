test('the counter counts', () => {
  burrow('build');
  assert.equal(burrow('call', '--local', ACTOR, 'test', 'increment', '[2]'), '2');
  assert.equal(burrow('call', '--local', ACTOR, 'test', 'increment', '[3]'), '5');
  assert.equal(burrow('call', '--local', ACTOR, 'test', 'get'), '5');
});
