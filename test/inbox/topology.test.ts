import { sampleConsumers } from '../../src/sample';
import { bindingOf, topology, validateTopology } from '../../src/topology';

describe('src/topology.json', () => {
  it('declares a subscription for every sample consumer, and a consumer for every subscription', () => {
    const declared = topology.topics.flatMap((topic) => topic.subscriptions.map((s) => s.consumer)).sort();

    expect(declared).toEqual(sampleConsumers.map((consumer) => consumer.name).sort());
  });

  it('binds each consumer to its topic, subscription and subjects', () => {
    expect(bindingOf('billing.payment-applier')).toEqual({
      topic: 'business-events',
      subscription: 'billing-payment-applier',
      subjects: ['PaymentReceived'],
    });
  });

  it('says where to declare an unknown consumer', () => {
    expect(() => bindingOf('nobody')).toThrow("Consumer 'nobody' is not declared in src/topology.json");
  });

  it('refuses duplicates and missing filters', () => {
    const invalid = {
      topics: [
        {
          name: 'events',
          subscriptions: [
            { name: 'a', consumer: 'x', subjects: ['S'] },
            { name: 'a', consumer: 'x', subjects: [] },
          ],
        },
      ],
    };

    expect(() => validateTopology(invalid)).toThrow(
      /declared twice[\s\S]*declared twice[\s\S]*at least one subject/,
    );
  });
});
