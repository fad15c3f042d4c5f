// Lets the SDK's modules run under Node for unit tests: every
// `burrow:actor/<interface>@0.1.0` import resolves to test/fake/<interface>.mjs,
// which forwards to the handlers a test installs on `fake` (fake/host.mjs);
// wasi:http resolves to fake/outgoing-handler.mjs and fake/http-types.mjs.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
