import { readdirSync } from 'node:fs';
import { join } from 'node:path';

import { app, type InvocationContext, type Timer } from '@azure/functions';

/**
 * The function app as the host would index it: every file in functions/ is loaded, and what it
 * registers with `app.serviceBusTopic` and `app.timer` is recorded, handler included. The offline
 * host model then drives exactly those handlers.
 */
export interface ServiceBusRegistration {
  name: string;
  connection: string;
  topicName: string;
  subscriptionName: string;
  handler: (message: unknown, context: InvocationContext) => Promise<void>;
}

export interface TimerRegistration {
  name: string;
  schedule: string;
  handler: (timer: Timer, context: InvocationContext) => Promise<void>;
}

export interface FunctionApp {
  serviceBus: ServiceBusRegistration[];
  timers: TimerRegistration[];
}

const FUNCTIONS_DIR = join(__dirname, '..', '..', 'functions');

/** Loads functions/*.ts once per process (module caching means a second call registers nothing). */
export function loadFunctionApp(directory = FUNCTIONS_DIR): FunctionApp {
  const registered: FunctionApp = { serviceBus: [], timers: [] };
  const original = { serviceBusTopic: app.serviceBusTopic, timer: app.timer };
  app.serviceBusTopic = (name, options) => {
    registered.serviceBus.push({
      name,
      connection: options.connection,
      topicName: options.topicName,
      subscriptionName: options.subscriptionName,
      handler: options.handler as ServiceBusRegistration['handler'],
    });
  };
  app.timer = (name, options) => {
    registered.timers.push({
      name,
      schedule: options.schedule,
      handler: options.handler as TimerRegistration['handler'],
    });
  };
  try {
    for (const file of readdirSync(directory)
      .filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith('.d.ts'))
      .sort()) {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- loads each function file, as the host does
      require(join(directory, file));
    }
  } finally {
    Object.assign(app, original);
  }
  return registered;
}
