import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { RuleTester } from 'eslint';
import tseslint from 'typescript-eslint';

import { boundaries } from '../../src/build/boundaries.cjs';
import { PROJECT_ROOT } from '../../src/cli/project';

/**
 * The lint rule that keeps the workspace's boundaries (eslint.config.mjs; `npm run lint` runs it over
 * the project), on planted imports: a relative import that leaves its package, a workspace package
 * not declared or reached past its entries, a development dependency in what is deployed, the sample
 * from outside it, and a command from the dev kit's CLI kit fail; the rest goes through. The
 * manifests it reads are the project's own.
 */
const tester = new RuleTester({
  languageOptions: { parser: tseslint.parser, ecmaVersion: 2023, sourceType: 'module' },
});
const at = (file: string, code: string): { filename: string; code: string } => ({
  filename: join(PROJECT_ROOT, file),
  code,
});

describe('the boundaries rule', () => {
  it('is wired into the project lint, from the dev kit as the app installs it', () => {
    const config = readFileSync(join(PROJECT_ROOT, 'eslint.config.mjs'), 'utf8');

    expect(config).toContain("import { boundaries } from '@idempotent-consumers/devkit/eslint';");
    expect(config).toContain("'house/boundaries': 'error'");
  });

  it('is set aside nowhere: no file disables it', () => {
    // The pattern is put together, so that this line is not one of the sites it finds.
    const directive = ['eslint', 'disable'].join('-');
    const grep = spawnSync(
      'git',
      ['grep', '-n', '-E', `${directive}.*house/boundaries`, '--', '*.ts', '*.js', '*.mjs', '*.cjs'],
      {
        cwd: PROJECT_ROOT,
        encoding: 'utf8',
      },
    );

    // git grep exits 1 when it finds nothing, 0 when it finds something, more on an error.
    expect([grep.status, grep.stdout]).toEqual([1, '']);
  });

  // RuleTester makes one jest test of each case.
  describe('lets imports within a package and through declared entries pass; fails the others', () => {
    tester.run('boundaries', boundaries, {
      valid: [
        at('src/app.ts', "import { loadSettings } from '@idempotent-consumers/inbox/internal';"),
        at('src/app.ts', "import type { LocalCosmos } from '@idempotent-consumers/local-azure';"),
        at('src/app.ts', "import { app } from '@azure/functions';"),
        at('src/app.ts', "import { readFileSync } from 'node:fs';"),
        at(
          'sample/src/paymentApplier.ts',
          "import { defineInboxConsumer } from '@idempotent-consumers/inbox';",
        ),
        at('functions/billing-payment-applier.ts', "import { paymentApplier } from '../sample/src';"),
        at('sample/demo.ts', "import { ScenarioEnvironment } from './scenario/run';"),
        at(
          'test/functions/x.test.ts',
          "import { main } from '@idempotent-consumers/devkit/internal/tools/send';",
        ),
        at('test/functions/x.test.ts', "import { useLocalStack } from '@idempotent-consumers/local-azure';"),
        at('packages/inbox/src/process.ts', "import { markerId } from './marker';"),
        at('packages/inbox/test/process.test.ts', "import { MAX_BODY_DEPTH } from '../src/process';"),
        at(
          'packages/inbox/test/process.test.ts',
          "import { defineInboxConsumer } from '@idempotent-consumers/inbox';",
        ),
        at(
          'packages/inbox/test/process.test.ts',
          "import { useLocalStack } from '@idempotent-consumers/local-azure';",
        ),
        at('packages/devkit/src/tools/send.ts', "import { runTool } from '../cli/tool';"),
        at(
          'packages/devkit/src/tools/send.ts',
          "import { startCosmos } from '@idempotent-consumers/local-azure';",
        ),
      ],
      invalid: [
        {
          ...at('packages/inbox/src/consumer.ts', "import { topology } from '../../../src/topology';"),
          errors: [
            {
              message:
                'packages/inbox/src/consumer.ts is in @idempotent-consumers/inbox (packages/inbox/); a relative import may not leave it (src/topology): that file belongs to another package.',
            },
          ],
        },
        {
          ...at(
            'packages/local-azure/src/cosmos/server.ts',
            "import { runTool } from '../../../devkit/src/cli/tool';",
          ),
          errors: [
            {
              message:
                /may not leave it \(packages\/devkit\/src\/cli\/tool\): import @idempotent-consumers\/devkit through its entries/,
            },
          ],
        },
        {
          ...at('src/app.ts', "export * from '../packages/inbox/src/internal';"),
          errors: [{ message: /^src\/app.ts is in the app; a relative import may not leave it/ }],
        },
        {
          ...at(
            'packages/inbox/test/settings.test.ts',
            "require('../../../functions/purge-expired-markers');",
          ),
          errors: [{ message: /may not leave it \(functions\/purge-expired-markers\)/ }],
        },
        {
          ...at(
            'packages/local-azure/src/servicebus/rules.ts',
            "import { RETRY_SUBJECT } from '@idempotent-consumers/inbox/internal';",
          ),
          errors: [
            {
              message:
                '@idempotent-consumers/local-azure (packages/local-azure/) imports @idempotent-consumers/inbox, which its package.json does not declare.',
            },
          ],
        },
        {
          ...at(
            'packages/inbox/src/consumer.ts',
            "import { MAX_BODY_DEPTH } from '@idempotent-consumers/inbox/internal';",
          ),
          errors: [{ message: /import its own modules by relative path, not by the package's name/ }],
        },
        {
          ...at(
            'test/functions/x.test.ts',
            "import { markerId } from '@idempotent-consumers/inbox/src/marker';",
          ),
          errors: [
            {
              message:
                /^@idempotent-consumers\/inbox\/src\/marker is not an entry of @idempotent-consumers\/inbox/,
            },
          ],
        },
        {
          ...at('src/app.ts', "import { startCosmos } from '@idempotent-consumers/local-azure';"),
          errors: [
            {
              message:
                /^src\/app.ts is deployed, and imports @idempotent-consumers\/local-azure, which is not among the app's dependencies/,
            },
          ],
        },
        {
          ...at('functions/outbox-relay.ts', "import fc from 'fast-check';"),
          errors: [{ message: /is deployed, and imports fast-check/ }],
        },
        {
          ...at('test/support/deliveries.ts', "import { SUBJECTS } from '../../sample/src';"),
          errors: [{ message: /may not import the sample/ }],
        },
        {
          ...at('src/app.ts', "import('../sample/src').then(() => undefined);"),
          errors: [{ message: /may not import the sample/ }],
        },
        {
          ...at('packages/devkit/src/cli/tool.ts', "import { main } from '../tools/send';"),
          errors: [{ message: /is the dev kit's CLI kit or build, which may not import a command/ }],
        },
      ],
    });
  });
});
