// Generates the Service Bus emulator's Config.json (emulators/servicebus-config.json) from
// src/topology.json, with the entity settings infra/ gives Azure, clamped to what the emulator accepts.
//
//   npm run emulators:config [-- --check]
//
// The emulator reads this file when it starts; it is committed, and a test keeps it in step with the
// declaration.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import {
  formatDuration,
  parseDurationSeconds,
  RETRY_PROPERTIES,
  RETRY_SUBJECT,
  type Topology,
} from '@idempotent-consumers/inbox/internal';

import { appTopology, PROJECT_ROOT } from '../cli/project';
import {
  type Command,
  EXIT_CODES,
  type ExitCode,
  parseFlags,
  runCommand,
  type ToolContext,
} from '../cli/tool';

const declaredTopology = appTopology();

export const CONFIG_PATH = path.join(PROJECT_ROOT, 'emulators', 'servicebus-config.json');

/** What every topic and subscription gets in Azure: the defaults of infra/main.bicep. */
export interface EntitySettings {
  /** Topic: the broker drops a second send of a MessageId within this window. */
  duplicateDetectionWindow: string;
  lockDuration: string;
  maxDeliveryCount: number;
  messageTimeToLive: string;
}

export const AZURE_ENTITY_SETTINGS: EntitySettings = {
  duplicateDetectionWindow: 'PT1H',
  lockDuration: 'PT1M',
  maxDeliveryCount: 10,
  messageTimeToLive: 'P14D',
};

/**
 * The emulator's documented limits: Config-schema.json of Azure/azure-service-bus-emulator-installer
 * and "Usage quotas" in https://learn.microsoft.com/azure/service-bus-messaging/overview-emulator.
 */
export const EMULATOR_LIMITS = {
  /** The one namespace; it cannot be renamed. */
  namespace: 'sbemulatorns',
  entityName: /^[A-Za-z0-9]$|^[A-Za-z0-9][\w./-]*[A-Za-z0-9]$/,
  /** Queues and topics together. */
  maxEntities: 50,
  maxSubscriptionsPerTopic: 50,
  maxCorrelationFiltersPerTopic: 1000,
  maxSqlFilters: 20,
  maxFilterLength: 1024,
  duplicateDetectionWindowSeconds: { min: 5, max: 300 },
  /** Of a subscription (a queue's minimum is PT5S). */
  lockDurationSeconds: { min: 60, max: 300 },
  maxDeliveryCount: { min: 1, max: 10 },
  messageTimeToLiveSeconds: { min: 300, max: 3600 },
} as const;

/** Our rules cannot be named $Default as in Azure: the emulator's rule names start with a letter or digit. */
export const RULE_NAME = 'subject-filter';

export type EmulatorRule =
  | { Name: string; Properties: { FilterType: 'Correlation'; CorrelationFilter: { Label: string } } }
  | { Name: string; Properties: { FilterType: 'Sql'; SqlFilter: { SqlExpression: string } } };

export interface EmulatorSubscription {
  Name: string;
  Properties: {
    DeadLetteringOnMessageExpiration: boolean;
    DefaultMessageTimeToLive: string;
    LockDuration: string;
    MaxDeliveryCount: number;
    ForwardDeadLetteredMessagesTo: string;
    ForwardTo: string;
    RequiresSession: boolean;
  };
  Rules: EmulatorRule[];
}

export interface EmulatorTopic {
  Name: string;
  Properties: {
    DefaultMessageTimeToLive: string;
    DuplicateDetectionHistoryTimeWindow: string;
    RequiresDuplicateDetection: boolean;
  };
  Subscriptions: EmulatorSubscription[];
}

export interface EmulatorConfig {
  UserConfig: {
    Namespaces: { Name: string; Queues: never[]; Topics: EmulatorTopic[] }[];
    Logging: { Type: 'Console' | 'File' | 'File,Console' | 'Console,File' };
  };
}

export interface GeneratedConfig {
  config: EmulatorConfig;
  /** Every setting that differs from Azure because the emulator does not accept the Azure value. */
  notes: string[];
}

/** The emulator's Config.json for these declarations, or an error listing what it cannot hold. */
export function emulatorConfig(
  topology: Topology = declaredTopology,
  azure: EntitySettings = AZURE_ENTITY_SETTINGS,
): GeneratedConfig {
  const notes: string[] = [];
  const limits = EMULATOR_LIMITS;
  const window = clampDuration(
    'duplicate detection window',
    azure.duplicateDetectionWindow,
    limits.duplicateDetectionWindowSeconds,
    notes,
    'a resend later than that after the first send reaches the consumers, and only the inbox absorbs it',
  );
  const lockDuration = clampDuration('lock duration', azure.lockDuration, limits.lockDurationSeconds, notes);
  const timeToLive = clampDuration(
    'message time to live',
    azure.messageTimeToLive,
    limits.messageTimeToLiveSeconds,
    notes,
    'a message nobody receives within that time is dead-lettered (TTLExpiredException)',
  );
  const maxDeliveryCount = Math.min(
    Math.max(azure.maxDeliveryCount, limits.maxDeliveryCount.min),
    limits.maxDeliveryCount.max,
  );
  if (maxDeliveryCount !== azure.maxDeliveryCount) {
    notes.push(
      `max delivery count: ${azure.maxDeliveryCount} in Azure, ${maxDeliveryCount} in the emulator (it accepts ${limits.maxDeliveryCount.min} to ${limits.maxDeliveryCount.max})`,
    );
  }

  const problems: string[] = [];
  if (topology.topics.length > limits.maxEntities) {
    problems.push(
      `${topology.topics.length} topics; the emulator holds at most ${limits.maxEntities} entities`,
    );
  }
  const topics = topology.topics.map((topic): EmulatorTopic => {
    checkName(`topic '${topic.name}'`, topic.name, problems);
    if (topic.subscriptions.length > limits.maxSubscriptionsPerTopic) {
      problems.push(
        `topic '${topic.name}' has ${topic.subscriptions.length} subscriptions; the emulator allows ${limits.maxSubscriptionsPerTopic}`,
      );
    }
    return {
      Name: topic.name,
      Properties: {
        DefaultMessageTimeToLive: timeToLive,
        DuplicateDetectionHistoryTimeWindow: window,
        RequiresDuplicateDetection: true,
      },
      Subscriptions: topic.subscriptions.map((subscription) => {
        checkName(`subscription '${topic.name}/${subscription.name}'`, subscription.name, problems);
        return {
          Name: subscription.name,
          Properties: {
            DeadLetteringOnMessageExpiration: true,
            DefaultMessageTimeToLive: timeToLive,
            LockDuration: lockDuration,
            MaxDeliveryCount: maxDeliveryCount,
            ForwardDeadLetteredMessagesTo: '',
            ForwardTo: '',
            RequiresSession: false,
          },
          Rules: [
            subjectRule(
              subscription.subjects,
              subscription.delayedRetry === undefined ? undefined : subscription.name,
            ),
          ],
        };
      }),
    };
  });

  const rules = topics.flatMap((topic) => topic.Subscriptions.map((s) => ({ topic, rule: s.Rules[0] })));
  const sqlFilters = rules.filter(({ rule }) => rule?.Properties.FilterType === 'Sql');
  if (sqlFilters.length > limits.maxSqlFilters) {
    problems.push(`${sqlFilters.length} SQL filters; the emulator allows ${limits.maxSqlFilters}`);
  }
  for (const { topic, rule } of sqlFilters) {
    const expression = rule?.Properties.FilterType === 'Sql' ? rule.Properties.SqlFilter.SqlExpression : '';
    if (expression.length > limits.maxFilterLength) {
      problems.push(
        `a filter of topic '${topic.Name}' is ${expression.length} characters; the emulator allows ${limits.maxFilterLength}`,
      );
    }
  }
  for (const topic of topics) {
    const correlationFilters = rules.filter(
      (entry) => entry.topic === topic && entry.rule?.Properties.FilterType === 'Correlation',
    ).length;
    if (correlationFilters > limits.maxCorrelationFiltersPerTopic) {
      problems.push(
        `topic '${topic.Name}' has ${correlationFilters} correlation filters; the emulator allows ${limits.maxCorrelationFiltersPerTopic}`,
      );
    }
  }
  if (problems.length > 0) {
    throw new Error(
      `The Service Bus emulator cannot hold src/topology.json:\n  - ${problems.join('\n  - ')}`,
    );
  }

  return {
    config: {
      UserConfig: {
        Namespaces: [{ Name: limits.namespace, Queues: [], Topics: topics }],
        Logging: { Type: 'Console' },
      },
    },
    notes,
  };
}

/** The file as the generator writes it (two-space JSON, which is also how Prettier formats it). */
export function renderEmulatorConfig(config: EmulatorConfig): string {
  return `${JSON.stringify(config, null, 2)}\n`;
}

// As in infra/modules/servicebus.bicep: one subject is a correlation filter on Subject (Label), the
// cheapest to evaluate; several need a SQL filter, and so does a subscription that declares
// delayedRetry (`retryFor`, its name): it also takes the delayed copies scheduled for it, and no
// other subscription's (packages/inbox/src/delayedRetry.ts).
function subjectRule(subjects: readonly string[], retryFor?: string): EmulatorRule {
  const [only] = subjects;
  if (subjects.length === 1 && only !== undefined && retryFor === undefined) {
    return { Name: RULE_NAME, Properties: { FilterType: 'Correlation', CorrelationFilter: { Label: only } } };
  }
  const sqlString = (text: string): string => `'${text.replace(/'/g, "''")}'`;
  const retries =
    retryFor === undefined
      ? ''
      : ` OR sys.Label = ${sqlString(RETRY_SUBJECT)} AND ${RETRY_PROPERTIES.for} = ${sqlString(retryFor)}`;
  return {
    Name: RULE_NAME,
    Properties: {
      FilterType: 'Sql',
      SqlFilter: { SqlExpression: `sys.Label IN (${subjects.map(sqlString).join(', ')})${retries}` },
    },
  };
}

function checkName(what: string, name: string, problems: string[]): void {
  if (!EMULATOR_LIMITS.entityName.test(name)) {
    problems.push(`${what}: the emulator's names start and end with a letter or digit`);
  }
}

function clampDuration(
  setting: string,
  azureValue: string,
  range: { min: number; max: number },
  notes: string[],
  consequence?: string,
): string {
  const seconds = parseDurationSeconds(azureValue, setting);
  const clamped = Math.min(Math.max(seconds, range.min), range.max);
  if (clamped === seconds) {
    return azureValue;
  }
  const emulatorValue = formatDuration(clamped);
  notes.push(
    `${setting}: ${azureValue} in Azure, ${emulatorValue} in the emulator (it accepts ${formatDuration(range.min)} to ${formatDuration(range.max)})${consequence ? `: ${consequence}` : ''}`,
  );
  return emulatorValue;
}

/**
 * Writes emulators/servicebus-config.json for `topology` (what `npm run emulators:config` does, and
 * `npm run new:consumer` after it declares a subscription); returns what to tell the user.
 */
export function writeEmulatorConfig(topology: Topology = declaredTopology): string[] {
  const { config, notes } = emulatorConfig(topology);
  writeFileSync(CONFIG_PATH, renderEmulatorConfig(config));
  const [namespace] = config.UserConfig.Namespaces;
  const subscriptions = namespace?.Topics.reduce((count, topic) => count + topic.Subscriptions.length, 0);
  return [
    `Wrote ${path.relative(process.cwd(), CONFIG_PATH)}: ${namespace?.Topics.length} topic(s), ${subscriptions} subscription(s) from src/topology.json.`,
    ...notes.map((note) => `note: ${note}`),
    'Restart the emulator to load it: docker compose -f emulators/docker-compose.yml restart servicebus',
  ];
}

const USAGE = `Usage: npm run emulators:config -- [options]

Writes emulators/servicebus-config.json (the Service Bus emulator's Config.json) from src/topology.json.

  --check     write nothing; exit 1 when the file is not what src/topology.json gives
  -h, --help`;

function main(argv: string[], context: ToolContext): ExitCode {
  const { values } = parseFlags(
    argv,
    {
      options: {
        check: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    },
    USAGE,
    context.env,
  );
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  if (values.check) {
    const file = path.relative(process.cwd(), CONFIG_PATH);
    const current = existsSync(CONFIG_PATH) ? readFileSync(CONFIG_PATH, 'utf8') : '';
    if (current === renderEmulatorConfig(emulatorConfig().config)) {
      context.out(`${file} is up to date with src/topology.json.`);
      return EXIT_CODES.ok;
    }
    context.err(`${file} is out of date: run npm run emulators:config`);
    return EXIT_CODES.failed;
  }
  for (const line of writeEmulatorConfig()) context.out(line);
  return EXIT_CODES.ok;
}

export const command: Command = {
  name: 'emulators:config',
  main: (argv, context) => Promise.resolve(main(argv, context)),
  exitWhenDone: true,
};

if (require.main === module) runCommand(command);
