// Regenerates zod_formats.schema.json (zod's own JSON Schema output) and
// zod_formats.answers.json (what ECMAScript's RegExp, with the "u" flag that
// JSON Schema specifies, answers for each pattern). Needs Node and zod:
//   npm install --no-save zod@4.6.7 && node zod_formats.mjs
import { writeFileSync } from "node:fs";
import * as z from "zod";

const schema = z.toJSONSchema(z.object({ host: z.hostname(), wait: z.iso.duration(), mood: z.emoji() }));
writeFileSync("zod_formats.schema.json", JSON.stringify(schema, null, 2) + "\n");

const cases = {
  host: ["example.com", "a.b-c.d", "localhost", "example.com.", "-bad.com", "a..b", "x".repeat(254), "exa mple.com", "example.com\n", "ex\u0430mple.com"],
  wait: ["P1D", "PT1H30M", "P2W", "P1Y2M3DT4H5M6.5S", "P1W2D", "P", "PT", "P1DT", "1D", "P1.5D", "P1D\n"],
  mood: ["😀", "👍🏽", "🇫🇷", "#️⃣", "😀😀", "a", "😀a", "", "1", "\u200d"],
};
const answers = {};
for (const [field, values] of Object.entries(cases)) {
  const re = new RegExp(schema.properties[field].pattern, "u");
  answers[field] = values.map((v) => ({ value: v, match: re.test(v) }));
}
writeFileSync("zod_formats.answers.json", JSON.stringify(answers, null, 1) + "\n");
