/**
 * The `x-ms-documentdb-query-metrics` header Cosmos DB returns when a query asks for it
 * (`populateQueryMetrics`): `name=value` pairs joined by `;`, which @azure/cosmos parses into the
 * page's `queryMetrics`. The counts and sizes are the server's own; the times are measured around
 * the run, and the server keeps no index, so every query is a scan: an index hit ratio of 0 and
 * no time in index lookups.
 */
export interface QueryRun {
  retrievedDocumentCount: number;
  retrievedDocumentBytes: number;
  outputDocumentCount: number;
  outputDocumentBytes: number;
  executionTimeMs: number;
}

export function queryMetricsHeader(run: QueryRun): string {
  const ms = (value: number): string => value.toFixed(2);
  return [
    `totalExecutionTimeInMs=${ms(run.executionTimeMs)}`,
    'queryCompileTimeInMs=0.00',
    'queryLogicalPlanBuildTimeInMs=0.00',
    'queryPhysicalPlanBuildTimeInMs=0.00',
    'queryOptimizationTimeInMs=0.00',
    `VMExecutionTimeInMs=${ms(run.executionTimeMs)}`,
    'indexLookupTimeInMs=0.00',
    'documentLoadTimeInMs=0.00',
    'systemFunctionExecuteTimeInMs=0.00',
    'userFunctionExecuteTimeInMs=0.00',
    `retrievedDocumentCount=${run.retrievedDocumentCount}`,
    `retrievedDocumentSize=${run.retrievedDocumentBytes}`,
    `outputDocumentCount=${run.outputDocumentCount}`,
    `outputDocumentSize=${run.outputDocumentBytes}`,
    'writeOutputTimeInMs=0.00',
    'indexUtilizationRatio=0.00',
  ].join(';');
}
