// Loaded with `node --import` before the conformance suite: registers
// hooks.mjs, which gives the suite's bundle an fs with globSync on Node 20.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
