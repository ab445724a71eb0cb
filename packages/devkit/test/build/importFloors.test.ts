import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { RuleTester } from 'eslint';

import { ENTRIES, importFloors } from '../../src/build/importFloors.cjs';
import { PROJECT_ROOT } from '../../src/cli/project';

/**
 * The lint rule that keeps imports pointing one way (eslint.config.mjs; `npm run lint` runs it over
 * the project), on planted imports: it fails on one that points up, on a library file imported past
 * its entries and on the sample imported from outside it, and lets the rest through.
 */
const tester = new RuleTester({
  languageOptions: { ecmaVersion: 2023, sourceType: 'module' },
});
const at = (file: string, code: string): { filename: string; code: string } => ({
  filename: join(PROJECT_ROOT, file),
  code,
});

describe('the import-floors rule', () => {
  it("is wired into the project lint, and the entries are those the library's package.json exports", () => {
    const config = readFileSync(join(PROJECT_ROOT, 'eslint.config.mjs'), 'utf8');
    const library = JSON.parse(
      readFileSync(join(PROJECT_ROOT, 'packages', 'inbox', 'package.json'), 'utf8'),
    ) as {
      name: string;
      exports: Record<string, string>;
    };

    expect(config).toContain("'house/import-floors': 'error'");
    expect(
      Object.fromEntries(
        Object.entries(library.exports).map(([entry, file]) => [
          `${library.name}${entry.slice(1)}`,
          `packages/inbox/${file.slice(2)}`,
        ]),
      ),
    ).toEqual(ENTRIES);
  });

  // RuleTester makes one jest test of each case.
  describe('lets imports down a floor, within one, and from tests through; fails the others', () => {
    tester.run('import-floors', importFloors, {
      valid: [
        at('src/app.ts', "import { loadSettings } from '@idempotent-consumers/inbox/internal';"),
        at(
          'sample/src/paymentApplier.ts',
          "import { defineInboxConsumer } from '@idempotent-consumers/inbox';",
        ),
        at('packages/local-azure/src/host/worker.ts', "import { topology } from '../../../../src/topology';"),
        at(
          'packages/devkit/src/build/loadPackage.ts',
          "import { loadFunctionApp } from '../../../local-azure/src/host/worker';",
        ),
        at('packages/devkit/src/tools/send.ts', "import { runTool } from '../cli/tool';"),
        at('packages/devkit/src/tools/send.ts', "import { start } from '../../../local-azure/src/cosmos';"),
        at('packages/inbox/src/process.ts', "import { markerId } from './marker';"),
        at('functions/billing-payment-applier.ts', "import { paymentApplier } from '../sample/src';"),
        at('sample/demo.ts', "import { ScenarioEnvironment } from './scenario/run';"),
        at('packages/inbox/test/process.test.ts', "import { MAX_BODY_DEPTH } from '../src/process';"),
        at(
          'sample/test/commands.test.ts',
          "import { runTool } from '../../packages/devkit/src/tools/outbox';",
        ),
        at('packages/devkit/src/tools/send.ts', "import { parseArgs } from 'node:util';"),
      ],
      invalid: [
        {
          ...at('packages/inbox/src/consumer.ts', "import { bindingOf } from '../../../src/topology';"),
          errors: [
            { message: /packages\/inbox\/src\/consumer.ts is the library, which may not import the app/ },
          ],
        },
        {
          ...at(
            'packages/local-azure/src/cosmos/server.ts',
            "import { runTool } from '../../../devkit/src/cli/tool';",
          ),
          errors: [{ message: /is local Azure, which may not import the CLI kit and the build/ }],
        },
        {
          ...at('packages/devkit/src/cli/tool.ts', "import { main } from '../tools/send';"),
          errors: [{ message: /which may not import the commands/ }],
        },
        {
          ...at('src/app.ts', "const { main } = require('../packages/devkit/src/tools/peek');"),
          errors: [{ message: /is the app, which may not import the commands/ }],
        },
        {
          ...at(
            'packages/devkit/src/tools/outbox.ts',
            "import { formatDuration } from '../../../inbox/src/duration';",
          ),
          errors: [
            {
              message:
                "Import the library through its entries, '@idempotent-consumers/inbox' or '@idempotent-consumers/inbox/internal', not ../../../inbox/src/duration.",
            },
          ],
        },
        {
          ...at('src/app.ts', "export * from '../packages/inbox/src/internal';"),
          errors: [{ message: /through its entries/ }],
        },
        {
          ...at(
            'packages/local-azure/src/servicebus/broker.ts',
            "import { SUBJECTS } from '../../../../sample/src';",
          ),
          errors: [{ message: /may not import the sample/ }],
        },
        {
          ...at(
            'packages/devkit/src/tools/send.ts',
            "import('../../../../sample/src').then(() => undefined);",
          ),
          errors: [{ message: /may not import the sample/ }],
        },
      ],
    });
  });
});
