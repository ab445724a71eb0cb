import { appTopology } from '../../src/cli/project';
import { loadSubjectRules, parseEvent } from '../../src/tools/events';

/**
 * What npm run send knows of the subjects it may publish (issue 44): the consumers' schemas, found
 * by loading the app's function files; when they do not load (a file that does not compile), the
 * subjects of src/topology.json alone, bodies unchecked, and a warning that says so.
 */
describe("npm run send's subjects", () => {
  it("fall back to src/topology.json's, unchecked, when the function files do not load, and say why", async () => {
    const warnings: string[] = [];

    const rules = await loadSubjectRules({
      warn: (text) => warnings.push(text),
      load: () => Promise.reject(new SyntaxError('functions/broken.ts: Unexpected token (3:7)')),
    });

    const declared = appTopology().topics.flatMap((topic) =>
      topic.subscriptions.flatMap((subscription) => subscription.subjects ?? []),
    );
    expect([...rules.keys()].sort()).toEqual([...new Set(declared)].sort());
    expect([...rules.values()].every((rule) => rule.schemas.size === 0)).toBe(true);
    expect(warnings).toEqual([
      "The app's function files did not load (functions/broken.ts: Unexpected token (3:7)): src/topology.json's subjects are used alone, and bodies are not checked against the consumers' schemas.",
    ]);
    // Sent as written, named by its content (a MessageId rule reads only bodies a schema accepted).
    const [subject] = rules.keys();
    const event = parseEvent({ subject, body: { anything: 1 } }, 'flags', rules);
    expect([event.body, event.messageId]).toEqual([{ anything: 1 }, expect.stringMatching(/-[0-9a-f]{40}$/)]);
  });

  it("check bodies against the consumers' schemas when the function files load, warning of nothing", async () => {
    const warnings: string[] = [];

    const rules = await loadSubjectRules({ warn: (text) => warnings.push(text) });

    expect(warnings).toEqual([]);
    expect([...rules.values()].every((rule) => rule.schemas.size > 0)).toBe(true);
  });
});
