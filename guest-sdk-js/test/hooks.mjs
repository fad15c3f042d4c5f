const FAKES = new URL('./fake/', import.meta.url);

export async function resolve(specifier, context, next) {
  const match = /^burrow:actor\/([a-z-]+)@0\.1\.0$/.exec(specifier);
  if (match) return { url: new URL(`${match[1]}.mjs`, FAKES).href, shortCircuit: true };
  if (specifier === 'wasi:http/outgoing-handler@0.2.12') return { url: new URL('outgoing-handler.mjs', FAKES).href, shortCircuit: true };
  if (specifier === 'wasi:http/types@0.2.12') return { url: new URL('http-types.mjs', FAKES).href, shortCircuit: true };
  if (specifier === 'burrow-sdk') return next(new URL('../src/index.js', import.meta.url).href, context);
  return next(specifier, context);
}
